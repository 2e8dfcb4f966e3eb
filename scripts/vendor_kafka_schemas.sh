#!/usr/bin/env bash
# Re-vendor Apache Kafka's wire message schemas from a kafka-clients release on Maven Central.
#
#     scripts/vendor_kafka_schemas.sh 4.0.2     # then: python scripts/gen_protocol.py && commit both
#
# kafka-clients ships common/message/*.json as resources: they replace scripts/kafka-protocol/message/*.json, with the
# release's LICENSE and NOTICE, and scripts/kafka-protocol/README.md records the release and the jar's sha256.
# Run by hand only (needs mvn and the network); CI never runs it: the generated codec is committed and
# `gen_protocol.py --check` compares it with the vendored schemas. The KRaft metadata, coordinator and raft record
# schemas are not in kafka-clients, and kip896/ (the pre-4.0 definitions of the versions Kafka 4 removed and kfk
# still serves) is kept by hand: this script touches neither.
set -euo pipefail

release="${1:?usage: $0 <kafka release, e.g. 4.0.2>}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="$root/scripts/kafka-protocol"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mvn -q dependency:copy -Dartifact="org.apache.kafka:kafka-clients:$release" -DoutputDirectory="$work"
jar="$work/kafka-clients-$release.jar"
unzip -q "$jar" 'common/message/*.json' LICENSE NOTICE -d "$work/x"

rm -f "$target"/message/*.json
cp "$work"/x/common/message/*.json "$target/message/"
cp "$work/x/LICENSE" "$target/LICENSE-apache-kafka"
cp "$work/x/NOTICE" "$target/NOTICE-apache-kafka"

readme="$target/README.md"
line="message/: the schemas of Apache Kafka $release (org.apache.kafka:kafka-clients:$release, common/message/*.json, jar sha256 $(sha256sum "$jar" | cut -d' ' -f1))."
if grep -q '^message/: ' "$readme" 2>/dev/null; then
    sed -i "s#^message/: .*#$line#" "$readme"
else
    printf '%s\n' "$line" >>"$readme"
fi
echo "vendored $(ls "$target"/message/*.json | wc -l) schemas of Kafka $release; now run scripts/gen_protocol.py"
