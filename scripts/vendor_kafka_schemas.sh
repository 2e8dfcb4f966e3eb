#!/usr/bin/env bash
# Re-vendor Apache Kafka's JSON schemas from one release's jars on Maven Central.
#
#     scripts/vendor_kafka_schemas.sh 4.0.2     # then: python scripts/gen_protocol.py && commit both
#
# Each jar ships its schemas as resources; they replace the matching folder of scripts/kafka-protocol/, with the
# release's LICENSE and NOTICE (from kafka-clients), and scripts/kafka-protocol/README.md records the release and
# every jar's sha256. Run by hand only (needs mvn and the network); CI never runs it: the generated codec is committed
# and `gen_protocol.py --check` compares it with the vendored schemas. kip896/ (the pre-4.0 definitions of the
# versions Kafka 4 removed and kfk still serves) is kept by hand: this script leaves it alone.
set -euo pipefail

release="${1:?usage: $0 <kafka release, e.g. 4.0.2>}"
root="$(cd "$(dirname "$0")/.." && pwd)"
target="$root/scripts/kafka-protocol"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# artifact, folder of the schemas inside its jar, folder under scripts/kafka-protocol/
jars=(
    "kafka-clients common/message message"
    "kafka-metadata common/metadata metadata"
    "kafka-group-coordinator common/message coordinator/group"
    "kafka-transaction-coordinator common/message coordinator/transaction"
    "kafka-share-coordinator common/message coordinator/share"
    "kafka-raft common/message raft"
)
lines=()
for entry in "${jars[@]}"; do
    read -r artifact inside folder <<<"$entry"
    mvn -q dependency:copy -Dartifact="org.apache.kafka:$artifact:$release" -DoutputDirectory="$work"
    jar="$work/$artifact-$release.jar"
    unzip -q -o "$jar" "$inside/*.json" -d "$work/$artifact"
    rm -f "$target/$folder"/*.json
    cp "$work/$artifact/$inside"/*.json "$target/$folder/"
    lines+=("- $folder/: org.apache.kafka:$artifact:$release ($inside/*.json), jar sha256 $(sha256sum "$jar" | cut -d' ' -f1)")
done
unzip -q -o "$work/kafka-clients-$release.jar" LICENSE NOTICE -d "$work/legal"
cp "$work/legal/LICENSE" "$target/LICENSE-apache-kafka"
cp "$work/legal/NOTICE" "$target/NOTICE-apache-kafka"

{
    echo "# Apache Kafka's schemas, vendored (Apache-2.0: LICENSE-apache-kafka, NOTICE-apache-kafka)"
    echo
    echo "The schemas of Apache Kafka $release, written by scripts/vendor_kafka_schemas.sh (by hand, never in CI);"
    echo "scripts/gen_protocol.py generates kfk/protocol/ from them."
    echo
    printf '%s\n' "${lines[@]}"
    echo
    cat "$target/kip896.md"
} >"$target/README.md"
echo "vendored the schemas of Kafka $release; now run scripts/gen_protocol.py"
