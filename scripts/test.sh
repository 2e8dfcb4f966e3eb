#!/usr/bin/env bash
# Install everything the tests need and run them: the one test command README.md gives and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the tests drive as independent clients and services (kcat: librdkafka 2.0.2's CLI; zookeeper:
# the real ZooKeeper server of the ZooKeeper metadata backend's tests, with its Java runtime).
APT_PACKAGES=(kcat zookeeper zsh fish)  # fish and zsh: the completion scripts are run by their shells in the tests
missing=()
for package in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# Apache Kafka, the oracle of the interop tests (kfk.testing.apache_kafka), runs on a JDK (javac compiles the Java
# client tests) with its jars resolved by Maven; CI machines usually have both, else Debian's packages do.
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || missing+=(maven)
if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python3 -m pip install --quiet --disable-pip-version-check -e '.[test,spark]'

# Resolve Apache Kafka's jars from Maven Central into the kfk cache once, before the tests' workers need them.
python3 -c 'from kfk.testing.apache_kafka import kafka_classpath; kafka_classpath()'

# The generated codec is committed; it must be exactly what the generator writes from the specs it vendors.
python3 scripts/gen_protocol.py --check

# Layer rules from DESIGN.md.
lint-imports

# pytest exits 5 when it collected no test: that is a failure here, as any other non-zero code.
set +e
python3 -m pytest -n 2 -p no:cacheprovider "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "scripts/test.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
