"""Apache Kafka itself, runnable from tests: the oracle kfk is compared with (DESIGN.md, decision 11).

kfk vendors the protocol schemas of one Apache Kafka release (APACHE_KAFKA_VERSION); this module runs that same
release. Its jars come from Maven Central through `mvn` (a generated pom resolved with the dependency plugin's
copy-dependencies goal) into the kfk cache once, under a file lock so that parallel pytest-xdist workers resolve it
once between them. Nothing is downloaded from Apache's release mirrors and nothing is committed.

What it offers:
- `kafka_classpath()`: the resolved jars (broker, tools, clients, log4j2 behind slf4j so everything logs).
- `run_kafka_tool("topics", [...])`: one of Kafka's command-line tools, by the name of its kafka-*.sh script, run
  as that script would run it (the same main class), logging WARN and above to stderr as Kafka's tools do.
- `run_java` / `compile_java`: any Java program against that classpath (Java clients in tests).
- `ApacheKafka`: one KRaft node acting as broker and controller (what Kafka's quickstart runs), on ephemeral ports
  with its own data directory, formatted with `kafka-storage format --standalone` on first start (or, given a
  `release_version`, formatted at that release's metadata.version with a static quorum).

The JVMs log through a log4j2 configuration written here: the broker's WARN and above go to a file in its data
directory (`server.log`, shown by `ApacheKafka.output()` when a test fails) and its stdout stays quiet.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Mapping, Sequence

from kfk.testing.ports import free_port
from kfk.testing.zookeeper import ZooKeeperNotInstalledError, java_executable

#: The release whose protocol schemas kfk vendors (kfk/protocol, scripts/kafka-protocol).
APACHE_KAFKA_VERSION = "4.4.0"
#: The release kfk spoke before, kept runnable for the release-to-release checks (its clients and tools against kfk).
PREVIOUS_APACHE_KAFKA_VERSION = "4.0.2"
#: log4j2 behind slf4j 1.7 (the slf4j API Kafka 4.x is built against): the binding Kafka's own distribution ships.
LOG4J_VERSION = "2.24.3"

#: kafka-<tool>.sh -> the main class that script runs in Apache Kafka 4.4.
TOOL_MAIN_CLASSES = {
    "topics": "org.apache.kafka.tools.TopicCommand",
    "console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "dump-log": "org.apache.kafka.tools.DumpLogSegments",
    "reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "transactions": "org.apache.kafka.tools.TransactionsCommand",
    "acls": "org.apache.kafka.tools.AclCommand",
    "metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "storage": "kafka.tools.StorageTool",
    "configs": "org.apache.kafka.tools.ConfigCommand",
    "get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "features": "org.apache.kafka.tools.FeatureCommand",
    "cluster": "org.apache.kafka.tools.ClusterTool",
    "delegation-tokens": "org.apache.kafka.tools.DelegationTokenCommand",
}
#: The tools whose main class 4.1 moved from the Scala core into kafka-tools: where 4.0 has them.
_TOOL_MAIN_CLASSES_4_0 = {"dump-log": "kafka.tools.DumpLogSegments", "configs": "kafka.admin.ConfigCommand"}
BROKER_MAIN_CLASS = "kafka.Kafka"

#: JVM options of short-lived tools: a small heap and the client compiler only (they start faster on a busy
#: machine; Kafka's kafka-run-class.sh gives its tools a 256 MB heap too).
TOOL_JVM_OPTIONS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true")
#: The broker's default JVM options in tests: the client compiler only and the serial collector. On a loaded
#: two-core machine the node then answers in about half the time it takes with Kafka's production options.
QUICK_START_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
#: kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS: what a benchmark against Apache Kafka should run it with.
KAFKA_JVM_OPTIONS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
                     "-XX:+ExplicitGCInvokesConcurrent")

INSTALL_HINT = ("Apache Kafka runs on Java 17 with its jars resolved by Maven: install a JDK and Maven "
                "(Debian: `apt-get install openjdk-17-jdk-headless maven`)")


class MavenUnavailable(RuntimeError):
    """mvn or Java is missing, or Maven could not resolve the artifacts asked for."""


class ApacheKafkaUnavailable(RuntimeError):
    """Java, javac or mvn is missing, or Kafka's jars could not be resolved."""


class ApacheKafkaStartError(RuntimeError):
    """The Apache Kafka process exited, or did not answer Metadata in time."""


class JavaCompileError(RuntimeError):
    """javac rejected the sources (its diagnostics are the message)."""


def cache_dir() -> Path:
    """Where downloads and build outputs are kept between runs: $KFK_CACHE_DIR, else ~/.cache/kfk."""
    configured = os.environ.get("KFK_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "kfk"


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock held across processes (xdist workers resolving or compiling the same thing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _java() -> str:
    try:
        return java_executable()
    except ZooKeeperNotInstalledError:
        raise ApacheKafkaUnavailable(f"no Java runtime: {INSTALL_HINT}") from None


def _javac() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidate = Path(java_home, "bin", "javac") if java_home else None
    if candidate is not None and candidate.exists():
        return str(candidate)
    javac = shutil.which("javac")
    if javac is None:
        raise ApacheKafkaUnavailable(f"no javac: {INSTALL_HINT}")
    return javac


#: (groupId, artifactId, version) of a Maven artifact.
Artifact = tuple[str, str, str]


def _kafka_artifacts(version: str) -> list[Artifact]:
    """What Kafka's distribution puts in libs/ for the broker and tools: these and their runtime dependencies."""
    return [("org.apache.kafka", "kafka_2.13", version), ("org.apache.kafka", "kafka-tools", version),
            ("org.apache.kafka", "kafka-clients", version),
            ("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
            ("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION)]


def _pom(name: str, dependencies: Sequence[Artifact]) -> str:
    lines = "\n".join(f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                      f"<version>{artifact_version}</version></dependency>"
                      for group, artifact, artifact_version in dependencies)
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
            "  <modelVersion>4.0.0</modelVersion>\n"
            f"  <groupId>kfk.testing</groupId><artifactId>{name}</artifactId><version>1</version>\n"
            "  <packaging>pom</packaging>\n"
            f"  <dependencies>\n{lines}\n  </dependencies>\n</project>\n")


def _release_dir(version: str) -> Path:
    return cache_dir() / "apache-kafka" / version


def kafka_classpath(version: str = APACHE_KAFKA_VERSION) -> str:
    """The ':'-joined jars of Apache Kafka `version` (broker, tools, clients, log4j2), resolved once into the cache."""
    try:
        jars = maven_jars(_release_dir(version), _kafka_artifacts(version), f"Apache Kafka {version}")
    except MavenUnavailable as error:
        raise ApacheKafkaUnavailable(str(error)) from None
    return ":".join(map(str, jars))


#: Apache Kafka's Connect (connect-runtime, connect-file, connect-json, connect-mirror), the oracle of kfk.connect and
#: its MirrorMaker. 4.3.1: the newest release whose connect-file (and connect-mirror) Maven Central serves (4.4.0's is not published, and 4.3.1's does not run on 4.4.0's
#: clients).
CONNECT_VERSION = "4.3.1"
CONNECT_STANDALONE_MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectStandalone"
CONNECT_DISTRIBUTED_MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"


def connect_classpath(version: str = CONNECT_VERSION) -> str:
    """The ':'-joined jars of Apache Kafka's Connect runtime with the connectors its distribution ships (file,
    MirrorMaker 2's connect-mirror and connect-mirror-client) and log4j2, resolved once."""
    artifacts = [("org.apache.kafka", name, version) for name in ("connect-runtime", "connect-file", "connect-json",
                                                                  "connect-mirror", "connect-mirror-client")]
    artifacts += [("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
                  ("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION)]
    try:
        jars = maven_jars(cache_dir() / "apache-connect" / f"{version}-with-mirror", artifacts,
                         f"Apache Kafka Connect {version}")
    except MavenUnavailable as error:
        raise ApacheKafkaUnavailable(str(error)) from None
    return ":".join(map(str, jars))


#: The main class of connect-mirror-maker.sh (Apache Kafka's MirrorMaker 2 in dedicated mode), on connect_classpath().
MIRROR_MAKER_MAIN_CLASS = "org.apache.kafka.connect.mirror.MirrorMaker"


def maven_jars(directory: Path, dependencies: Sequence[Artifact], what: str) -> list[Path]:
    """The jars of `dependencies` and of their runtime dependencies, resolved once from Maven Central by mvn (a
    generated pom, the dependency plugin's copy-dependencies goal) into `directory`/libs, under a file lock.

    The list of jars is written last (classpath.txt), so a resolution interrupted half-way is redone, never used.
    `what` names the artifacts in error messages (MavenUnavailable).
    """
    listing = directory / "classpath.txt"
    if not listing.exists():
        with file_lock(directory / ".lock"):
            if not listing.exists():
                _resolve(directory, dependencies, what)
    jars = [Path(jar) for jar in listing.read_text().split()]
    missing = [jar for jar in jars if not jar.exists()]
    if missing:
        raise MavenUnavailable(f"{what}: jars went missing from {directory} ({missing[0]}); "
                               f"remove {listing} to resolve them again")
    return jars


def _resolve(directory: Path, dependencies: Sequence[Artifact], what: str) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenUnavailable(f"no mvn to resolve {what}: {INSTALL_HINT}")
    try:
        java_executable()  # mvn runs on it
    except ZooKeeperNotInstalledError:
        raise MavenUnavailable(f"no Java runtime to resolve {what}: {INSTALL_HINT}") from None
    libs = directory / "libs"
    shutil.rmtree(libs, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    pom = directory / "pom.xml"
    pom.write_text(_pom(directory.name, dependencies))
    command = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={libs}",
               "-DincludeScope=runtime"]
    try:
        result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        raise MavenUnavailable(f"mvn did not resolve {what} within 15 minutes") from None
    if result.returncode != 0:
        output = (result.stdout + result.stderr).strip()[-3000:]
        raise MavenUnavailable(f"mvn could not resolve {what} (exit {result.returncode}):\n{output}")
    jars = sorted(str(path) for path in libs.glob("*.jar"))
    expected = {f"{artifact}-{version}.jar" for _, artifact, version in dependencies}
    absent = sorted(expected - {Path(jar).name for jar in jars})
    if absent:
        raise MavenUnavailable(f"mvn finished but {', '.join(absent)} is not in {libs}")
    (directory / "classpath.txt.tmp").write_text("\n".join(jars) + "\n")
    os.replace(directory / "classpath.txt.tmp", directory / "classpath.txt")


def _log4j2_config(appender: str) -> str:
    """A log4j2 XML configuration: WARN and above to `appender` (an XML appender element named "out")."""
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<Configuration status="warn">\n'
            f"  <Appenders>\n    {appender}\n  </Appenders>\n"
            '  <Loggers>\n    <Root level="WARN"><AppenderRef ref="out"/></Root>\n  </Loggers>\n'
            "</Configuration>\n")


LOG_PATTERN = "[%d] %p %m (%c)%n"


def _tools_log4j2() -> Path:
    """The tools' logging: WARN and above on stderr (stdout is the tool's output, which tests parse)."""
    path = cache_dir() / "apache-kafka" / "tools-log4j2.xml"
    text = _log4j2_config(f'<Console name="out" target="SYSTEM_ERR"><PatternLayout pattern="{LOG_PATTERN}"/>'
                          "</Console>")
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_text(text)
        os.replace(temporary, path)
    return path


def _java_sources(sources: Path | Sequence[Path]) -> list[Path]:
    if isinstance(sources, (str, Path)):
        root = Path(sources)
        return sorted(root.rglob("*.java")) if root.is_dir() else [root]
    return sorted(Path(source) for source in sources)


def compile_java(sources: Path | Sequence[Path], classpath: str | None = None) -> Path:
    """javac `sources` (files, or a directory of .java files) against `classpath` (Kafka's when None), once: the
    classes land in cache_dir()/java-classes/<sha256 of the sources and classpath>/, which is returned."""
    if classpath is None:
        classpath = kafka_classpath()
    files = _java_sources(sources)
    if not files:
        raise JavaCompileError(f"no Java sources in {sources}")
    digest = hashlib.sha256(classpath.encode())
    for file in files:
        digest.update(file.name.encode() + b"\0" + file.read_bytes() + b"\0")
    target = cache_dir() / "java-classes" / digest.hexdigest()
    if target.exists():
        return target
    with file_lock(target.with_name(target.name + ".lock")):
        if target.exists():
            return target
        building = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        result = subprocess.run([_javac(), "-nowarn", "-encoding", "UTF-8", "-d", str(building), "-cp", classpath,
                                 *map(str, files)], capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if result.returncode != 0:
            shutil.rmtree(building, ignore_errors=True)
            raise JavaCompileError(f"javac failed:\n{(result.stdout + result.stderr).strip()[-4000:]}")
        os.replace(building, target)
    return target


def run_java(main_class: str, args: list[str], classpath: str | None = None, *, input: str | None = None,
             timeout: float = 120, extra_classpath: Iterable[Path] = (),
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run `main_class` (text in and out, both captured) on Kafka's classpath plus `extra_classpath` (e.g. the
    directory compile_java returned). Never raises on a non-zero exit: tests assert on returncode and output."""
    command = java_command(main_class, args, classpath, extra_classpath)
    return subprocess.run(command, input=input, capture_output=True, text=True, timeout=timeout,
                          stdin=None if input is not None else subprocess.DEVNULL,
                          env=dict(os.environ, **env) if env is not None else None)


def java_command(main_class: str, args: list[str], classpath: str | None = None,
                 extra_classpath: Iterable[Path] = ()) -> list[str]:
    """The command line run_java runs, for a test that drives a long-lived program itself (Popen, stdin)."""
    if classpath is None:
        classpath = kafka_classpath()
    full_classpath = ":".join([*map(str, extra_classpath), classpath])
    return [_java(), *TOOL_JVM_OPTIONS, f"-Dlog4j2.configurationFile={_tools_log4j2()}", "-cp", full_classpath,
            main_class, *args]


def run_kafka_tool(tool: str, args: list[str], *, version: str = APACHE_KAFKA_VERSION,
                   **kw) -> subprocess.CompletedProcess:
    """Run Kafka's kafka-`tool`.sh (e.g. "topics", "dump-log") of release `version` with `args`; keywords as
    run_java (its classpath defaults to that release's)."""
    try:
        main_class = TOOL_MAIN_CLASSES[tool]
    except KeyError:
        raise ValueError(f"unknown Kafka tool {tool!r}; known: {', '.join(sorted(TOOL_MAIN_CLASSES))}") from None
    if version.startswith("4.0."):
        main_class = _TOOL_MAIN_CLASSES_4_0.get(tool, main_class)
    if kw.get("classpath") is None:
        kw["classpath"] = kafka_classpath(version)
    return run_java(main_class, args, **kw)


def random_cluster_id() -> str:
    """A cluster id as Kafka writes one: a random UUID in unpadded URL-safe base64 (never starting with '-',
    which Kafka's Uuid.randomUuid rerolls because command lines would take it for a flag)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _metadata_v0_brokers(host: str, port: int, timeout: float = 2.0) -> int | None:
    """How many brokers a Metadata v0 request to host:port lists, or None if the port does not answer it.

    Apache Kafka opens its client listener only once the broker has caught up with the metadata log and
    registered; a Metadata answer listing a broker is the moment clients can use it."""
    client_id = b"kfk-testing"
    body = struct.pack(">hhih", 3, 0, 1, len(client_id)) + client_id + struct.pack(">i", 0)
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(struct.pack(">i", len(body)) + body)
            header = _read_exactly(sock, 4)
            (size,) = struct.unpack(">i", header)
            response = _read_exactly(sock, size)
    except OSError:  # refused, reset, closed mid-response (ConnectionError), timed out: not serving yet
        return None
    if len(response) < 8:
        return None
    correlation_id, broker_count = struct.unpack_from(">ii", response)
    return broker_count if correlation_id == 1 else None


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed mid-response")
        chunks += chunk
    return bytes(chunks)


class ApacheKafka:
    """One Apache Kafka KRaft node (process.roles=broker,controller) in a subprocess, on 127.0.0.1.

    `data_dir` holds everything: server.properties, the log4j2 config, server.log (WARN and above), stdout.log (the
    JVM's own output) and logs/ (log.dirs, which is also the metadata log dir). `config` entries are written to
    server.properties after the defaults here, so they win. Ports are chosen once and kept across restarts.
    `jvm_options` default to QUICK_START_JVM_OPTIONS; pass KAFKA_JVM_OPTIONS to measure Apache Kafka as deployed.
    `release_version` (e.g. "3.3-IV3"): format at that metadata.version (`--release-version`, every other feature
    at that release's default) with a static quorum (controller.quorum.voters, kraft.version 0), which every level
    allows; by default the node is formatted at Kafka's latest level with a dynamic quorum (`--standalone`).
    `features` (with `release_version`): levels that override the release's defaults (`--feature name=level`).
    """

    def __init__(self, data_dir: Path, *, port: int | None = None, controller_port: int | None = None,
                 node_id: int = 1, config: dict[str, str] | None = None, heap: str = "1G",
                 jvm_options: Sequence[str] = QUICK_START_JVM_OPTIONS, release_version: str | None = None,
                 features: Mapping[str, int] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = port or free_port()
        self.controller_port = controller_port or free_port()
        self.node_id = node_id
        self.config = dict(config or {})
        self.heap = heap
        self.jvm_options = list(jvm_options)
        self.release_version = release_version
        self.features = dict(features or {})
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap_server(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_dir(self) -> Path:
        return self.data_dir / "logs"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "server.log"

    def properties(self) -> dict[str, str]:
        """server.properties: a combined node as Kafka's config/server.properties, with a test's replication
        factors of 1 (one node) and no initial rebalance delay."""
        properties = {
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            **({"controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}"}
               if self.release_version is None
               else {"controller.quorum.voters": f"{self.node_id}@127.0.0.1:{self.controller_port}"}),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.log_dir),
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
        }
        properties.update(self.config)
        return properties

    def _write_files(self) -> tuple[Path, Path]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        server_properties = self.data_dir / "server.properties"
        server_properties.write_text("".join(f"{key}={value}\n" for key, value in self.properties().items()))
        log4j2 = self.data_dir / "log4j2.xml"
        log4j2.write_text(_log4j2_config(
            f'<File name="out" fileName="{self.log_path}" append="true">'
            f'<PatternLayout pattern="{LOG_PATTERN}"/></File>'))
        return server_properties, log4j2

    def _format(self, server_properties: Path) -> None:
        quorum = ["--standalone"] if self.release_version is None else ["--release-version", self.release_version]
        for name, level in self.features.items():
            quorum += ["--feature", f"{name}={level}"]
        result = run_kafka_tool("storage", ["format", *quorum, "-t", random_cluster_id(),
                                            "-c", str(server_properties)])
        if result.returncode != 0:
            raise ApacheKafkaStartError(f"kafka-storage format failed (exit {result.returncode}):\n"
                                        f"{result.stdout}{result.stderr}")

    def start(self, timeout: float = 90) -> ApacheKafka:
        """Format the storage if it has never been, start the node, and wait until it answers Metadata."""
        if self.process is not None and self.process.poll() is None:
            return self
        classpath = kafka_classpath()
        server_properties, log4j2 = self._write_files()
        if not (self.log_dir / "meta.properties").exists():
            self._format(server_properties)
        command = [_java(), f"-Xmx{self.heap}", *self.jvm_options, "-Djava.awt.headless=true",
                   f"-Dlog4j2.configurationFile={log4j2}", f"-Dkafka.logs.dir={self.data_dir}", "-cp", classpath,
                   BROKER_MAIN_CLASS, str(server_properties)]
        with open(self.data_dir / "stdout.log", "ab") as stdout:
            self.process = subprocess.Popen(command, stdout=stdout, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise ApacheKafkaStartError(f"Apache Kafka exited with {code}:\n{self.output()[-4000:]}")
            if (_metadata_v0_brokers("127.0.0.1", self.port) or 0) > 0:
                return self
            time.sleep(0.2)
        self.stop()
        raise ApacheKafkaStartError(f"Apache Kafka did not answer Metadata within {timeout}s:\n"
                                    f"{self.output()[-4000:]}")

    def stop(self, timeout: float = 30) -> None:
        """SIGTERM (Kafka's controlled shutdown: logs flushed, clean-shutdown marker written), then SIGKILL if it
        is still running after `timeout` seconds. Stopping a stopped node does nothing."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def output(self) -> str:
        """The broker's WARN-and-above log followed by the JVM's own stdout/stderr (for failure reports)."""
        parts = []
        for path in (self.log_path, self.data_dir / "stdout.log"):
            if path.exists():
                parts.append(f"--- {path.name} ---\n{path.read_text('utf-8', 'replace')}")
        return "\n".join(parts)

    def __enter__(self) -> ApacheKafka:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
