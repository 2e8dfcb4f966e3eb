"""KRaft storage files against Apache Kafka's: `kfk storage format` writes what kafka-storage format writes (and
Apache Kafka starts on it), kfk's snapshot reader rebuilds from Kafka's own snapshots the image its log holds, and
Apache Kafka boots from a kfk broker's snapshot and the log after it.
(test_dump_log_agrees.py runs both dump-log tools on kfk's and Kafka's snapshots.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.backends.embedded.record_serde import deserialize_record
from kfk.backends.embedded.snapshots import list_snapshots, read_snapshot, snapshot_path
from kfk.metadata.image import MetadataImage
from kfk.records import iter_batches
from kfk.storage.meta_properties import read_properties
from kfk.testing.apache_kafka import PREVIOUS_APACHE_KAFKA_VERSION, ApacheKafka, run_kafka_tool
from kfk.testing.ports import free_port

from .conftest import CODECS, COMPACTED_TOPIC, WrittenLogDir, codec_topic
from .dump_log_output import sections

CLUSTER_ID = "i2J_3iFvQempjf-HJcyt3A"
#: The release whose kafka-storage format `kfk storage format` is compared with: 4.0's, whose files
#: (bootstrap.checkpoint) and lines kfk's format writes. Kafka 4.4's format puts the bootstrap records in __cluster_metadata-0's first
#: checkpoint, prints them, and formats its own newer metadata.version levels; Kafka 4.4 still boots from kfk's
#: files (test_apache_kafka_starts_on_storage_kfk_formatted).
FORMAT_RELEASE = PREVIOUS_APACHE_KAFKA_VERSION
DIRECTORY_ID = "Q7-7vSpQRUSspz-EfM29kg"


def kfk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def _server_properties(directory: Path) -> Path:
    directory.mkdir(parents=True)
    path = directory / "server.properties"
    path.write_text("process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n"
                    "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
                    "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"
                    f"log.dirs={directory / 'meta'},{directory / 'data'}\n")
    return path


def test_format_writes_the_files_kafkas_format_writes(tmp_path: Path) -> None:
    flags = ["-t", CLUSTER_ID, "--release-version", "3.3-IV3",
             "--initial-controllers", f"1@127.0.0.1:9093:{DIRECTORY_ID},2@h2:9094:AAAAAAAAAAAAAAAAAAAAAQ"]
    written = {}
    for who in ("kafka", "kfk"):
        config = _server_properties(tmp_path / who)
        if who == "kafka":
            result = run_kafka_tool("storage", ["format", "-c", str(config), *flags],
                                    version=FORMAT_RELEASE)
        else:
            result = kfk("storage", "format", "-c", str(config), *flags)
        assert result.returncode == 0, result.stdout + result.stderr
        # Kafka's tool lists the dirs in no fixed order; kfk's format leaves the .lock it held (Kafka's lock file).
        written[who] = (sorted(result.stdout.replace(str(tmp_path / who), "<dir>").splitlines()),
                        sorted(str(path.relative_to(tmp_path / who)) for path in (tmp_path / who).rglob("*")
                               if path.name != ".lock"))
    assert written["kfk"] == written["kafka"]
    for name in ("meta", "data"):
        kafka_meta = read_properties(str(tmp_path / "kafka" / name / "meta.properties"))
        kfk_meta = read_properties(str(tmp_path / "kfk" / name / "meta.properties"))
        if name == "data":  # a random directory.id each
            kafka_meta.pop("directory.id"), kfk_meta.pop("directory.id")
        assert kfk_meta == kafka_meta
    checkpoints = ["meta/bootstrap.checkpoint", "data/bootstrap.checkpoint",
                   "meta/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint"]
    dumps = {}
    for who in ("kafka", "kfk"):
        files = ",".join(str(tmp_path / who / name) for name in checkpoints)
        result = run_kafka_tool("dump-log", ["--files", files, "--cluster-metadata-decoder"])
        assert result.returncode == 0, result.stderr
        dumps[who] = [_timeless(line) for lines in sections(result.stdout).values() for line in lines]
    assert dumps["kfk"] == dumps["kafka"]
    assert any("KRaftVoters" in line and DIRECTORY_ID in line for line in dumps["kfk"])


#: Flags, then what Apache Kafka 4.0.2's tool does with them (the metadata.version it formats, or a fragment of its
#: refusal), then what kfk does (the same). Kafka 4.0 formats any level from 3.3-IV3 to 4.0-IV3, at 4.0-IV3 by
#: default; kfk's controller writes every level up to 4.4-IV2, its default (Kafka 4.4's), and refuses the others
#: in Kafka's words.
METADATA_VERSION_FLAGS = [
    ([], "4.0-IV3", "4.4-IV2"),
    (["--release-version", "3.3"], "3.3-IV3", "3.3-IV3"),
    (["--feature", "metadata.version=7"], "3.3-IV3", "3.3-IV3"),
    (["--release-version", "4.0-IV3"], "4.0-IV3", "4.0-IV3"),
    (["--feature", "metadata.version=25"], "4.0-IV3", "4.0-IV3"),
    (["--release-version", "5.0"], "Version 5.0 is not a valid version. The minimum version is 3.3-IV3",
     "Version 5.0 is not a valid version. The minimum version is 3.3-IV3 and the maximum version is 4.4-IV2"),
    (["--release-version", "3.3", "--feature", "metadata.version=7"],
     "Use --release-version instead of --feature metadata.version=X to avoid ambiguity.",
     "Use --release-version instead of --feature metadata.version=X to avoid ambiguity."),
    # The other features: levels kfk serves, Kafka's refusals in its words, and what kfk does not serve (yet).
    (["--feature", "transaction.version=1"], "4.0-IV3", "4.4-IV2"),
    (["--release-version", "3.3", "--feature", "transaction.version=2"], "3.3-IV3", "3.3-IV3"),
    (["--feature", "transaction.version=5"], "No feature:transaction.version with feature level 5",
     "No feature:transaction.version with feature level 5"),
    (["--release-version", "3.3", "--feature", "eligible.leader.replicas.version=1"],
     "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23",
     "eligible.leader.replicas.version could not be set to 1 because it depends on metadata.version level 23"),
    (["--release-version", "4.0-IV3", "--feature", "eligible.leader.replicas.version=1"], "4.0-IV3", "4.0-IV3"),
    (["--release-version", "3.3", "--feature", "group.version=1"], "3.3-IV3", "3.3-IV3"),
    (["--release-version", "3.4", "--add-scram", "SCRAM-SHA-256=[name=alice,password=a]"],
     "SCRAM is only supported in metadata.version 3.5-IV2 or later.",
     "SCRAM is only supported in metadata.version 3.5-IV2 or later."),
    (["--release-version", "3.5", "--add-scram", "SCRAM-SHA-256=[name=alice,password=a]"], "3.5-IV2", "3.5-IV2"),
    (["--feature", "foo.version=1"], "Unsupported feature: foo.version. Supported features are: ",
     "Unsupported feature: foo.version. Supported features are: eligible.leader.replicas.version, group.version, "
     "kraft.version, share.version, streams.version, transaction.version"),
]
LEVEL = re.compile(r"\d\.\d-IV\d")


@pytest.mark.parametrize("flags, kafka_outcome, kfk_outcome", METADATA_VERSION_FLAGS,
                         ids=[" ".join(flags) or "default" for flags, _, _ in METADATA_VERSION_FLAGS])
def test_format_takes_the_metadata_versions_kfk_serves_and_refuses_the_others_in_one_line(
        tmp_path: Path, flags: list[str], kafka_outcome: str, kfk_outcome: str) -> None:
    results = {}
    for who in ("kafka", "kfk"):
        config = tmp_path / who / "server.properties"
        config.parent.mkdir()
        config.write_text("process.roles=broker,controller\nnode.id=1\ncontroller.listener.names=CONTROLLER\n"
                          "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
                          f"controller.quorum.voters=1@127.0.0.1:9093\nlog.dirs={tmp_path / who / 'meta'}\n")
        args = ["format", "-c", str(config), "-t", CLUSTER_ID, *flags]
        results[who] = (run_kafka_tool("storage", args, version=FORMAT_RELEASE) if who == "kafka"
                        else kfk("storage", *args))
    kafka, formatted = results["kafka"], (tmp_path / "kfk" / "meta" / "bootstrap.checkpoint").exists()
    if LEVEL.fullmatch(kafka_outcome):  # a level: Kafka formats at it
        assert kafka.returncode == 0 and f"with metadata.version {kafka_outcome}." in kafka.stdout, kafka.stderr
    else:
        assert kafka.returncode != 0 and kafka_outcome in kafka.stderr, kafka.stdout + kafka.stderr
    result = results["kfk"]
    if LEVEL.fullmatch(kfk_outcome):
        assert result.returncode == 0 and result.stdout.endswith(f"with metadata.version {kfk_outcome}.\n"), \
            result.stderr
        assert formatted
    else:
        assert result.returncode == 1 and result.stderr.startswith(f"kfk: {kfk_outcome}"), result.stderr
        assert len(result.stderr.splitlines()) == 1 and not formatted


def _timeless(line: str) -> str:
    """A dump-log line without what differs between two runs: times and the CRCs over them, file paths."""
    line = re.sub(r"(CreateTime: |crc: |\"lastContainedLogTimestamp\":)\d+", r"\1#", line)
    return re.sub(r"/\S+/(kafka|kfk)/", "/", line)


def test_apache_kafka_starts_on_storage_kfk_formatted(tmp_path: Path) -> None:
    """kfk's bootstrap.checkpoint and initial voter set are what Apache Kafka's controller boots from."""
    node = ApacheKafka(tmp_path / "node")
    server_properties, _ = node._write_files()
    result = kfk("storage", "format", "-t", CLUSTER_ID, "-c", str(server_properties), "--standalone")
    assert result.returncode == 0, result.stderr
    directory_id = read_properties(str(node.log_dir / "meta.properties"))["directory.id"]
    with node:
        status = run_kafka_tool("metadata-quorum", ["--bootstrap-server", node.bootstrap_server, "describe",
                                                    "--status"])
        features = run_kafka_tool("features", ["--bootstrap-server", node.bootstrap_server, "describe"])
    assert status.returncode == 0, status.stderr
    assert f"ClusterId:              {CLUSTER_ID}" in status.stdout
    assert f'"directoryId": "{directory_id}"' in status.stdout
    assert f'"endpoints": ["CONTROLLER://127.0.0.1:{node.controller_port}"]' in status.stdout
    assert re.search(r"Feature: metadata.version\s.*FinalizedVersionLevel: 4.4-IV2", features.stdout), features.stdout
    assert re.search(r"Feature: eligible.leader.replicas.version\s.*FinalizedVersionLevel: 1", features.stdout), \
        features.stdout
    assert re.search(r"Feature: kraft.version\s.*FinalizedVersionLevel: 1", features.stdout), features.stdout


def test_kfk_reads_apache_kafkas_snapshots(apache_kafka_written_log_dir: WrittenLogDir) -> None:
    """Every snapshot Apache Kafka wrote reads whole; the newest rebuilds the image that replaying Kafka's log up
    to the snapshot's end offset builds."""
    directory = apache_kafka_written_log_dir.path / "__cluster_metadata-0"
    snapshot_ids = list_snapshots(str(directory))
    assert len(snapshot_ids) >= 2, snapshot_ids
    for snapshot_id in snapshot_ids:
        read_snapshot(snapshot_path(str(directory), snapshot_id))
    newest = read_snapshot(snapshot_path(str(directory), snapshot_ids[-1]))
    assert newest.kraft_version == 1 and [voter.voter_id for voter in newest.voters.voters] == [1]
    end_offset = newest.snapshot_id.end_offset
    from_snapshot = MetadataImage().apply(newest.records, end_offset - 1)

    records = []
    for segment in sorted(directory.glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            if not batch.is_control:
                records += [deserialize_record(record.value) for record in batch.records()
                            if record.offset < end_offset]
    from_log = MetadataImage().apply(records, end_offset - 1)
    assert from_snapshot == from_log
    assert {codec_topic(codec) for codec in CODECS} | {COMPACTED_TOPIC} <= set(from_snapshot.topics_by_name)
    assert from_snapshot.features["metadata.version"] >= 7 and from_snapshot.brokers[1].endpoints


def test_apache_kafka_boots_from_kfks_snapshot_and_the_log_after_it(tmp_path: Path, kfk_broker_factory) -> None:
    """A kfk broker's metadata: topic `snapshotted` only in a snapshot (the log trimmed behind it), topic `logged`
    only in the log after it. Apache Kafka, started on a copy as the same static single voter, serves both."""
    broker = kfk_broker_factory({"metadata.log.max.record.bytes.between.snapshots": "1",
                                 "metadata.log.segment.bytes": "512", "metadata.log.segment.min.bytes": "512"})
    metadata_dir = broker.log_dir / "__cluster_metadata-0"

    def create(name: str, config: dict[str, str]) -> None:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        for future in admin.create_topics([NewTopic(name, 2, 1, config=config)]).values():
            future.result(30)

    create("snapshotted", {"retention.ms": "777"})
    deadline = time.monotonic() + 10
    while (metadata_dir / "00000000000000000000.log").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert broker.stop() == 0
    broker.overrides["metadata.log.max.record.bytes.between.snapshots"] = str(2**40)
    broker.start()
    create("logged", {"cleanup.policy": "compact"})
    assert broker.stop() == 0
    [snapshot_id] = list_snapshots(str(metadata_dir))
    segments = sorted(int(path.name.split(".")[0]) for path in metadata_dir.glob("*.log"))
    assert 0 < segments[0] <= snapshot_id.end_offset

    controller_port = free_port()
    node = ApacheKafka(tmp_path / "kafka", controller_port=controller_port, config={
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}", "controller.quorum.bootstrap.servers": ""})
    shutil.copytree(broker.log_dir, node.log_dir)
    with node:
        described = run_kafka_tool("topics", ["--bootstrap-server", node.bootstrap_server, "--describe"])
    assert described.returncode == 0, described.stderr[-3000:]
    # min.insync.replicas=1: the cluster-wide value eligible leader replicas keep (Kafka lists dynamic defaults).
    assert re.search(r"Topic: snapshotted\tTopicId: \S+\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: "
                     r"min.insync.replicas=1,retention.ms=777", described.stdout), described.stdout
    assert re.search(r"Topic: logged\tTopicId: \S+\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: "
                     r"min.insync.replicas=1,cleanup.policy=compact", described.stdout), described.stdout
