"""The console's views beyond topics and groups, against a real kfk broker (KRaft, one node): a topic config set and its
override deleted from the topic page (as kafka-configs --add-config / --delete-config, read back with the Admin
client), a group's committed offsets of a topic deleted and then the group itself, a transactional producer on the
transactions page and in the topic's producers panel, the SCRAM users and client quotas on the security page (ACLs
there say why they are missing: no authorizer), and the metadata quorum with its leader; a broker's static configs."""

from __future__ import annotations

import html
import re
import urllib.parse

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from kfk.client import Admin, ConfigResource, ConfigResourceType
from kfk.client.structs import ClientQuotaAlteration, UserScramCredentialUpsertion
from kfk.common.client_quotas import ClientQuotaEntity
from tests.ui.conftest import ConsoleSession


def _topic_config(bootstrap: str, topic: str, name: str):
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return admin.describe_configs([resource])[resource][name]


def test_topic_config_editing_transactions_security_and_quorum(kfk_broker, console_factory) -> None:
    console = ConsoleSession(console_factory(kfk_broker).url)
    with Admin({"bootstrap.servers": kfk_broker}) as admin:
        leader_id = admin.describe_cluster().brokers[0].node_id
    console.post("topics", {"name": "edited", "partitions": "1"})

    status, location, _ = console.post("topics/edited/configs", {"op": "set", "config": "retention.ms",
                                                                 "value": "3600000"})
    assert status == 303 and urllib.parse.unquote_plus(location).endswith("notice=set retention.ms=3600000")
    entry = _topic_config(kfk_broker, "edited", "retention.ms")
    assert (entry.value, entry.source.name) == ("3600000", "DYNAMIC_TOPIC_CONFIG")
    status, body = console.get("topics/edited")
    assert status == 200 and 'id="set-config"' in body and "Use the default" in body
    status, location, _ = console.post("topics/edited/configs", {"op": "set", "config": "retention.ms",
                                                                 "value": "soon"})
    assert status == 303 and "cannot change retention.ms" in urllib.parse.unquote_plus(location)
    status, location, _ = console.post("topics/edited/configs", {"op": "delete", "config": "retention.ms"})
    assert status == 303 and "deleted+the+override+of+retention.ms" in location
    assert _topic_config(kfk_broker, "edited", "retention.ms").is_default

    committer = Consumer({"bootstrap.servers": kfk_broker, "group.id": "deletable", "enable.auto.commit": False})
    committer.commit(offsets=[ConfluentTopicPartition("edited", 0, 0)], asynchronous=False)
    committer.close()
    status, location, _ = console.post("groups/deletable/delete-offsets", {"topic": "edited"})
    assert status == 303 and "deleted+the+committed+offsets+of+1+partition" in location
    with Admin({"bootstrap.servers": kfk_broker}) as admin:
        assert admin.list_consumer_group_offsets("deletable") == {}
    status, location, _ = console.post("groups/deletable/delete-offsets", {"topic": "edited"})
    assert status == 303 and "has+no+committed+offsets+of+edited" in location
    status, location, _ = console.post("groups/deletable/delete", {})
    assert status == 303 and location.startswith("/groups?") and "deleted+group+deletable" in location
    with Admin({"bootstrap.servers": kfk_broker}) as admin:
        assert "deletable" not in {listing.group_id for listing in admin.list_consumer_groups()}

    producer = Producer({"bootstrap.servers": kfk_broker, "transactional.id": "console-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("edited", b"in a transaction", partition=0)
    producer.commit_transaction(30)
    status, body = console.get("transactions")
    row = re.search(r'<td class="mono">console-txn</td><td class="num">(\d+)</td><td>(\w+)</td>', body)
    assert status == 200 and row is not None and row.group(2) == "CompleteCommit"
    status, body = console.get("topics/edited")
    producers = body[body.index('id="producers"'):]
    assert f'<td class="num">{row.group(1)}</td>' in producers  # the transactional producer's id

    with Admin({"bootstrap.servers": kfk_broker}) as admin:
        assert admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "console-user", "SCRAM-SHA-256", 8192, "secret")]) == {"console-user": None}
        entity = ClientQuotaEntity.of([("client-id", "throttled")])
        assert admin.alter_client_quotas([ClientQuotaAlteration(entity, {"producer_byte_rate": 1024.0})]) == {
            entity: None}
    status, body = console.get("security")
    text = html.unescape(body)
    assert status == 200
    assert "ACLs not shown" in text  # no authorizer: Kafka's SECURITY_DISABLED, named in the note
    assert "console-user</td><td>SCRAM-SHA-256 (8192 iterations)" in text
    assert "client-id=throttled</td>" in text and "producer_byte_rate=1024.0" in text

    status, body = console.get(f"brokers/{leader_id}")
    configs = html.unescape(body[body.index('id="broker-configs"'):])
    assert status == 200 and re.search(r'<td class="mono">log\.dirs</td><td class="mono">[^<]+</td>'
                                       r'<td>STATIC_BROKER_CONFIG</td>', configs)
    assert console.get("brokers/77")[0] == 404

    status, body = console.get("quorum")
    leader = re.search(r'id="quorum-leader">(\d+)<', body)
    assert status == 200 and leader is not None
    assert re.search(rf'<td class="num">{leader.group(1)} <span class="badge">leader</span>', body)
