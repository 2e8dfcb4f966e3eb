#!/usr/bin/env bash
# Install everything the tests need and run them: the one test command README.md gives and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the tests drive as independent clients and services (kcat: librdkafka 2.0.2's CLI; zookeeper:
# the real ZooKeeper server of the ZooKeeper metadata backend's tests, with its Java runtime).
# chromium: the headless browser the web console's tests drive (through Playwright, which never downloads one).
# postgresql: the server the JDBC connectors' tests start (kfk.testing.postgres), and the libpq psycopg loads.
APT_PACKAGES=(kcat zookeeper zsh fish chromium postgresql)  # fish and zsh: the completion scripts are run by their shells in the tests
missing=()
for package in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# Apache Kafka, the oracle of the interop tests (kfk.testing.apache_kafka), runs on a JDK (javac compiles the Java
# client tests) with its jars resolved by Maven; CI machines usually have both, else Debian's packages do.
command -v javac >/dev/null || missing+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || missing+=(maven)
# franz-go (Go) and kafkajs (Node) interop tests: node and npm from Debian if absent (kafkajs needs node >= 14).
# franz-go 1.22 needs Go >= 1.26, newer than Debian's golang-go: the machine's toolchain (/usr/local/go) is used.
command -v npm >/dev/null || missing+=(nodejs npm)
if [ "${#missing[@]}" -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python3 -m pip install --quiet --disable-pip-version-check -e '.[test,spark,registry,streams,connect-jdbc]'
# That install compiled the record codec's C accelerator (setup.py; optional, so a failed build only warns): the tests
# compare it with the pure-Python codec, so say here, with the reason, if it is missing.
python3 -c 'import kfk.records._accel' || {
    echo "scripts/test.sh: kfk.records._accel was not built: the tests need a C compiler and Python's headers" >&2
    exit 1
}

# Resolve Apache Kafka's jars from Maven Central into the kfk cache once, before the tests' workers need them: the
# release the tests run, and the previous one the release-to-release checks run.
python3 -c 'from kfk.testing.apache_kafka import PREVIOUS_APACHE_KAFKA_VERSION, kafka_classpath
kafka_classpath(); kafka_classpath(PREVIOUS_APACHE_KAFKA_VERSION)'
# And Spark's own Kafka connector (spark-sql-kafka-0-10), which tests/spark compares kfk's Spark export with.
python3 -c 'from kfk.testing.spark_kafka import spark_kafka_connector; spark_kafka_connector()'

# Build the franz-go program and install kafkajs into the kfk cache (tests/interop/programs.py), so that no test
# waits for a download; without go, node or npm this fails here, as the tests would.
if [ -x /usr/local/go/bin/go ]; then export PATH="$PATH:/usr/local/go/bin"; fi
python3 -m tests.interop.programs

# The generated codec is committed; it must be exactly what the generator writes from the specs it vendors.
python3 scripts/gen_protocol.py --check

# Layer rules from DESIGN.md.
lint-imports

# pytest exits 5 when it collected no test: that is a failure here, as any other non-zero code. Three workers on
# the 2-core CI machine: most tests wait on brokers, JVMs and Spark they started, so a third worker fills the cores
# (2026-12-07: 29:44 with three workers on a quiet machine, every test passing; CI's last runs with two took 43-44
# minutes).
set +e
python3 -m pytest -n 3 --dist loadfile --no-loadscope-reorder -p no:cacheprovider --durations=25 "$@"
status=$?
# The integration suite (real clients over real sockets, transactions among them) and the differential suite again,
# against brokers with two network processes each (num.network.threads=2: kfk.server.network_processes); the cluster
# suite runs against those in the pass above (tests/cluster/conftest.py). Skipped when arguments narrowed the run.
if [ "$#" -eq 0 ]; then
    KFK_TEST_NETWORK_THREADS=2 python3 -m pytest -n 3 --dist loadfile --no-loadscope-reorder -p no:cacheprovider \
        tests/integration tests/interop/test_differential.py
    second=$?
    [ "$status" -ne 0 ] || status=$second
fi
set -e
if [ "$status" -eq 5 ]; then
    echo "scripts/test.sh: pytest collected no tests" >&2
    exit 1
fi
exit "$status"
