"""`kfk storage format` as kafka-storage format (Kafka 4.0): meta.properties, bootstrap.checkpoint in every log dir
(with the --add-scram credentials), the dynamic quorum's initial voters in __cluster_metadata-0's first snapshot,
Kafka's rules and lines; and a node of a multi-node cluster refusing unformatted storage. Through `python -m kfk`
subprocesses.
(tests/interop/test_kraft_storage.py compares the files with those Apache Kafka's own tool writes.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kfk.backends.embedded.snapshots import read_snapshot
from kfk.protocol.metadata_records import schema_class
from kfk.storage.meta_properties import MetaProperties
from kfk.common.uuids import uuid_to_base64

CLUSTER_ID = "i2J_3iFvQempjf-HJcyt3A"
DIRECTORY_ID = "Q7-7vSpQRUSspz-EfM29kg"
FeatureLevelRecord = schema_class("FeatureLevelRecord")


def kfk(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def server_properties(tmp_path: Path, **extra: str) -> tuple[Path, Path, Path]:
    first, second = tmp_path / "a", tmp_path / "b"
    properties = {
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "controller.listener.names": "CONTROLLER",
        "controller.quorum.bootstrap.servers": "127.0.0.1:9093",
        "log.dirs": f"{first},{second}", **{key.replace("_", "."): value for key, value in extra.items()},
    }
    path = tmp_path / "server.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    return path, first, second


def test_standalone_writes_the_voter_set_and_the_bootstrap_snapshot(tmp_path: Path) -> None:
    config, first, second = server_properties(tmp_path)
    result = kfk("storage", "format", "-t", CLUSTER_ID, "-c", str(config), "--standalone")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"Formatting data directory {second} with metadata.version 4.4-IV2.",
        f"Formatting dynamic metadata voter directory {first} with metadata.version 4.4-IV2."]
    metas = [MetaProperties.read(str(directory)) for directory in (first, second)]
    assert {(meta.version, meta.cluster_id, meta.node_id) for meta in metas} == {(1, CLUSTER_ID, 1)}
    assert metas[0].directory_id != metas[1].directory_id
    for directory in (first, second):
        bootstrap = read_snapshot(str(directory / "bootstrap.checkpoint"))
        assert [(r.name, r.feature_level) for r in bootstrap.records] == [("metadata.version", 33),
                                                                          ("eligible.leader.replicas.version", 1),
                                                                          ("group.version", 1),
                                                                          ("transaction.version", 2)]
        assert bootstrap.voters is None and bootstrap.last_contained_log_timestamp == 0
    assert not (second / "__cluster_metadata-0").exists()
    voters = read_snapshot(str(first / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"))
    assert voters.snapshot_id == (0, 0) and voters.records == [] and voters.kraft_version == 1
    [voter] = voters.voters.voters
    assert voter.voter_id == 1 and uuid_to_base64(voter.voter_directory_id) == metas[0].directory_id
    assert [(e.name, e.host, e.port) for e in voter.endpoints] == [("CONTROLLER", "127.0.0.1", 9093)]

    again = kfk("storage", "format", "-t", CLUSTER_ID, "-c", str(config), "--standalone")
    assert again.returncode == 1 and again.stderr.splitlines() == [
        f"kfk: Log directory {first} is already formatted. Use --ignore-formatted to ignore this directory and "
        "format the others."]
    ignored = kfk("storage", "format", "-t", CLUSTER_ID, "-c", str(config), "--standalone", "--ignore-formatted")
    assert ignored.returncode == 0 and ignored.stdout == "All of the log directories are already formatted.\n"


def test_add_scram_credentials_go_into_every_bootstrap_checkpoint_only(tmp_path: Path) -> None:
    """After the metadata.version, in the order given; the initial voter set's snapshot keeps no records (Kafka
    4.0's layout: the controller bootstraps from bootstrap.checkpoint)."""
    config, first, second = server_properties(tmp_path)
    result = kfk("storage", "format", "-t", CLUSTER_ID, "-c", str(config), "--standalone",
                 "--add-scram", "SCRAM-SHA-512=[name=bob,iterations=8192,password=bob-secret]",
                 "-S", "SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert result.returncode == 0, result.stderr
    for directory in (first, second):
        records = read_snapshot(str(directory / "bootstrap.checkpoint")).records
        assert records[:4] == [FeatureLevelRecord(name="metadata.version", feature_level=33),
                               FeatureLevelRecord(name="eligible.leader.replicas.version", feature_level=1),
                               FeatureLevelRecord(name="group.version", feature_level=1),
                               FeatureLevelRecord(name="transaction.version", feature_level=2)]
        assert [(r.name, r.mechanism, r.iterations) for r in records[4:]] == [("bob", 2, 8192), ("alice", 1, 4096)]
    voters = read_snapshot(str(first / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"))
    assert voters.records == [] and voters.voters is not None


def test_initial_controllers_give_the_metadata_dir_its_directory_id(tmp_path: Path) -> None:
    config, first, second = server_properties(tmp_path)
    result = kfk("storage", "format", "-t", CLUSTER_ID, "-c", str(config), "--release-version", "3.3-IV3",
                 "--initial-controllers", f"1@127.0.0.1:9093:{DIRECTORY_ID},2@h2:9094:AAAAAAAAAAAAAAAAAAAAAQ")
    assert result.returncode == 0, result.stderr
    assert MetaProperties.read(str(first)).directory_id == DIRECTORY_ID
    assert MetaProperties.read(str(second)).directory_id != DIRECTORY_ID
    snapshot = read_snapshot(str(first / "__cluster_metadata-0" / "00000000000000000000-0000000000.checkpoint"))
    assert [(v.voter_id, uuid_to_base64(v.voter_directory_id), [(e.name, e.host, e.port) for e in v.endpoints])
            for v in snapshot.voters.voters] == [
        (1, DIRECTORY_ID, [("CONTROLLER", "127.0.0.1", 9093)]),
        (2, "AAAAAAAAAAAAAAAAAAAAAQ", [("CONTROLLER", "h2", 9094)])]


@pytest.mark.parametrize("flags, extra, message", [
    ([], {}, "Because controller.quorum.voters is not set on this controller, you must specify one of the "
             "following: --standalone, --initial-controllers, or --no-initial-controllers."),
    (["--standalone"], {"controller_quorum_voters": "1@127.0.0.1:9093"}, "controller.quorum.voters must not be set"),
    (["--standalone"], {"process_roles": "broker"}, "process.roles must include controller"),
    (["--standalone", "--initial-controllers", f"1@h:1:{DIRECTORY_ID}"], {}, "give at most one of --standalone"),
    (["--initial-controllers", "1@nowhere"], {}, "Invalid --initial-controllers entry '1@nowhere'"),
    (["--standalone", "--release-version", "4.5-IV0"], {}, "Version 4.5-IV0 is not a valid version. The minimum "
                                                          "version is 3.3-IV3 and the maximum version is 4.4-IV2"),
    (["--standalone", "--add-scram", "SCRAM-SHA-256=[name=alice,password=a]", "-S", "SCRAM-SHA-256=[name=bob]"], {},
     "kfk: You must supply one of 'password' or 'saltedpassword' to add-scram"),
    (["--standalone", "-S", "SCRAM-SHA-1=[name=a,password=b]"], {}, "The add-scram mechanism SCRAM-SHA-1 is not"),
])
def test_refusals_are_one_line_and_write_nothing(tmp_path: Path, flags: list[str], extra: dict[str, str],
                                                 message: str) -> None:
    config, first, second = server_properties(tmp_path, **extra)
    result = kfk("storage", "format", "-t", CLUSTER_ID, "-c", str(config), *flags)
    assert result.returncode == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert message in result.stderr
    assert not (first / "meta.properties").exists() and not (second / "meta.properties").exists()


def test_no_initial_controllers_formats_a_node_joining_a_dynamic_quorum(tmp_path: Path) -> None:
    config, first, _ = server_properties(tmp_path)
    result = kfk("storage", "format", "-t", CLUSTER_ID, "-c", str(config), "--no-initial-controllers")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == f"Formatting metadata directory {first} with metadata.version 4.4-IV2."
    assert (first / "bootstrap.checkpoint").exists() and not (first / "__cluster_metadata-0").exists()


def test_a_multi_node_quorum_member_refuses_unformatted_storage(tmp_path: Path) -> None:
    result = kfk("server", "start", "--override", f"log.dirs={tmp_path / 'data'}",
                 "--override", "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094",
                 "--override", "controller.listener.names=CONTROLLER",
                 "--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0")
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = [line for line in result.stderr.splitlines() if line.startswith("kfk:")]
    assert "No meta.properties found in" in line and "kfk storage format --cluster-id" in line
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "data" / "meta.properties").exists()
