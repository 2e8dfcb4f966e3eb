"""The REST API's answers and refusals as Confluent's Schema Registry gives them (codes, statuses, content type),
over plain HTTP: versions and `latest`, soft and hard deletes with ?deleted=true, lookups, ids, references, config
and mode; and the state it keeps in _schemas: a restarted instance and a second instance see the same subjects and
ids, a secondary forwards writes to the primary, and a killed primary is replaced."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid

import pytest
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.integration

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def call(url: str, method: str = "GET", body: object = None) -> tuple[int, object]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": CONTENT_TYPE})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            assert response.headers["Content-Type"].startswith(CONTENT_TYPE)
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def eventually(check, timeout: float = 30.0) -> bool:
    """Whether ``check()`` holds within ``timeout`` seconds (polled)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def avro(*fields: dict, name: str = "Event") -> dict:
    return {"schema": json.dumps({"type": "record", "name": name, "fields": list(fields)})}


def subject_name() -> str:
    return f"events-{uuid.uuid4().hex[:8]}-value"


def test_versions_lookup_and_refusals(registry) -> None:
    url, subject = registry.url, subject_name()
    assert call(f"{url}/subjects/{subject}/versions") == (404, {"error_code": 40401,
                                                               "message": f"Subject '{subject}' not found."})
    status, first = call(f"{url}/subjects/{subject}/versions", "POST", avro({"name": "a", "type": "int"}))
    assert status == 200
    status, second = call(f"{url}/subjects/{subject}/versions", "POST",
                          avro({"name": "a", "type": "long"}))  # int promotes to long: BACKWARD holds
    assert status == 200 and second["id"] != first["id"]
    assert call(f"{url}/subjects/{subject}/versions") == (200, [1, 2])
    status, latest = call(f"{url}/subjects/{subject}/versions/latest")
    assert (latest["version"], latest["id"], latest["subject"]) == (2, second["id"], subject)
    assert "schemaType" not in latest  # Avro, the default, is not named
    assert call(f"{url}/subjects/{subject}/versions/1/schema") == (
        200, {"type": "record", "name": "Event", "fields": [{"name": "a", "type": "int"}]})
    assert call(f"{url}/subjects/{subject}/versions/3")[1]["error_code"] == 40402
    assert call(f"{url}/subjects/{subject}/versions/0")[1]["error_code"] == 42202
    assert call(f"{url}/subjects/{subject}/versions/x")[0] == 422
    assert call(f"{url}/subjects/{subject}", "POST", avro({"name": "a", "type": "int"}))[1]["version"] == 1
    assert call(f"{url}/subjects/{subject}", "POST", avro({"name": "b", "type": "int"}))[1]["error_code"] == 40403
    status, invalid = call(f"{url}/subjects/{subject}/versions", "POST", {"schema": "{\"type\": \"recrd\"}"})
    assert (status, invalid["error_code"]) == (422, 42201)
    status, refused = call(f"{url}/subjects/{subject}/versions", "POST", avro({"name": "a", "type": "string"}))
    assert (status, refused["error_code"]) == (409, 409) and "TYPE_MISMATCH" in refused["message"]
    status, verdict = call(f"{url}/compatibility/subjects/{subject}/versions/latest?verbose=true", "POST",
                           avro({"name": "a", "type": "string"}))
    assert status == 200 and verdict["is_compatible"] is False and verdict["messages"]
    assert call(f"{url}/compatibility/subjects/{subject}/versions/latest", "POST",
                avro({"name": "a", "type": "double"})) == (200, {"is_compatible": True})
    assert call(f"{url}/schemas/ids/{first['id']}") == (
        200, {"schema": call(f"{url}/subjects/{subject}/versions/1")[1]["schema"]})
    assert call(f"{url}/schemas/ids/{first['id']}/versions") == (200, [{"subject": subject, "version": 1}])
    assert call(f"{url}/schemas/ids/{first['id']}/subjects") == (200, [subject])
    assert call(f"{url}/schemas/ids/99999")[1]["error_code"] == 40403
    assert call(f"{url}/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])


def test_soft_and_hard_deletes(registry) -> None:
    url, subject = registry.url, subject_name()
    for field_type in ("int", "long"):
        call(f"{url}/subjects/{subject}/versions", "POST", avro({"name": "a", "type": field_type}))
    assert call(f"{url}/subjects/{subject}/versions/1?permanent=true", "DELETE")[1]["error_code"] == 40407
    assert call(f"{url}/subjects/{subject}/versions/1", "DELETE") == (200, 1)
    assert call(f"{url}/subjects/{subject}/versions/1", "DELETE")[1]["error_code"] == 40406
    assert call(f"{url}/subjects/{subject}/versions") == (200, [2])
    assert call(f"{url}/subjects/{subject}/versions?deleted=true") == (200, [1, 2])
    assert call(f"{url}/subjects/{subject}/versions/1")[1]["error_code"] == 40402
    assert call(f"{url}/subjects/{subject}/versions/1?deleted=true")[1]["version"] == 1
    assert call(f"{url}/subjects/{subject}/versions/1?permanent=true", "DELETE") == (200, 1)
    assert call(f"{url}/subjects/{subject}/versions?deleted=true") == (200, [2])
    assert call(f"{url}/subjects/{subject}?permanent=true", "DELETE")[1]["error_code"] == 40405
    assert call(f"{url}/subjects/{subject}", "DELETE") == (200, [2])
    assert subject not in call(f"{url}/subjects")[1]
    assert subject in call(f"{url}/subjects?deleted=true")[1]
    assert call(f"{url}/subjects/{subject}", "DELETE")[1]["error_code"] == 40404
    assert call(f"{url}/subjects/{subject}?permanent=true", "DELETE") == (200, [2])
    assert subject not in call(f"{url}/subjects?deleted=true")[1]
    assert call(f"{url}/subjects/{subject}", "DELETE")[1]["error_code"] == 40401
    # a new version after deletes continues the numbering only from what remains
    assert call(f"{url}/subjects/{subject}/versions", "POST", avro({"name": "a", "type": "int"}))[1]["version"] == 1


def test_config_mode_and_references(registry) -> None:
    url, subject = registry.url, subject_name()
    assert call(f"{url}/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(f"{url}/config/{subject}")[1]["error_code"] == 40408
    assert call(f"{url}/config/{subject}?defaultToGlobal=true") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(f"{url}/config/{subject}", "PUT", {"compatibility": "sideways"})[1]["error_code"] == 42203
    assert call(f"{url}/config/{subject}", "PUT", {"compatibility": "NONE"}) == (200, {"compatibility": "NONE"})
    call(f"{url}/subjects/{subject}/versions", "POST", avro({"name": "a", "type": "int"}))
    assert call(f"{url}/subjects/{subject}/versions", "POST", avro({"name": "a", "type": "string"}))[0] == 200
    assert call(f"{url}/config/{subject}", "DELETE") == (200, {"compatibilityLevel": "NONE"})
    assert call(f"{url}/mode") == (200, {"mode": "READWRITE"})
    assert call(f"{url}/mode/{subject}", "PUT", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    status, refused = call(f"{url}/subjects/{subject}/versions", "POST", avro({"name": "b", "type": "int"}))
    assert (status, refused["error_code"]) == (422, 42205)
    assert call(f"{url}/mode/{subject}", "DELETE") == (200, {"mode": "READONLY"})

    # references: an Avro record using a named type registered under another subject
    address_subject = subject_name()
    address = {"type": "record", "name": "Address", "namespace": "shop",
               "fields": [{"name": "city", "type": "string"}]}
    call(f"{url}/subjects/{address_subject}/versions", "POST", {"schema": json.dumps(address)})
    customer = {"type": "record", "name": "Customer", "namespace": "shop",
                "fields": [{"name": "address", "type": "shop.Address"}]}
    reference = {"name": "shop.Address", "subject": address_subject, "version": 1}
    status, registered = call(f"{url}/subjects/{subject_name()}/versions", "POST",
                              {"schema": json.dumps(customer), "references": [reference]})
    assert status == 200
    assert call(f"{url}/schemas/ids/{registered['id']}")[1]["references"] == [reference]
    assert call(f"{url}/subjects/{address_subject}/versions/1/referencedby") == (200, [registered["id"]])
    assert call(f"{url}/subjects/{address_subject}", "DELETE")[1]["error_code"] == 42206
    status, missing = call(f"{url}/subjects/{subject_name()}/versions", "POST",
                           {"schema": json.dumps(customer)})  # without the reference, shop.Address is unknown
    assert (status, missing["error_code"]) == (422, 42201)


def test_contexts(registry) -> None:
    """Schema contexts as Confluent's registry keeps them: subjects qualified ``:.ctx:subject``, ids numbered per
    context, GET /contexts, the subject listing across contexts, a context's own config, unqualified references
    resolved in the referrer's context, and the base path /contexts/.ctx that clients may use as their URL."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    url, name = registry.url, subject_name()
    context, other = f".ctx{uuid.uuid4().hex[:6]}", f".ctx{uuid.uuid4().hex[:6]}"
    qualified = f":{context}:{name}"
    status, first = call(f"{url}/subjects/{qualified}/versions", "POST", avro({"name": "a", "type": "int"}))
    assert (status, first["id"]) == (200, 1)  # a new context numbers its ids from 1
    _, default_registration = call(f"{url}/subjects/{name}/versions", "POST", avro({"name": "a", "type": "int"}))
    assert default_registration["version"] == 1
    contexts = call(f"{url}/contexts")[1]
    assert contexts[0] == "." and context in contexts and contexts == [".", *sorted(contexts[1:])]
    assert {qualified, name} <= set(call(f"{url}/subjects")[1])
    assert call(f"{url}/subjects?subjectPrefix=:{context}:") == (200, [qualified])
    assert call(f"{url}/subjects?subjectPrefix=:*:{name}")[1] == sorted([qualified, name])
    assert call(f"{url}/schemas/ids/1/subjects?subject={qualified}") == (200, [qualified])
    assert call(f"{url}/subjects/{qualified}/versions/1")[1]["id"] == 1

    # the context's base path: the same subject, unqualified
    status, second = call(f"{url}/contexts/{context}/subjects/{name}/versions", "POST",
                          avro({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}))
    assert (status, second["id"]) == (200, 2)
    assert call(f"{url}/subjects/{qualified}/versions") == (200, [1, 2])
    assert call(f"{url}/contexts/{context}/schemas/ids/2")[1]["schema"] == call(
        f"{url}/subjects/{qualified}/versions/2")[1]["schema"]
    assert call(f"{url}/contexts/{context}/subjects") == (200, [qualified])
    # a context's config applies to its subjects only
    incompatible = avro({"name": "a", "type": "string"})
    assert call(f"{url}/contexts/{context}/config", "PUT", {"compatibility": "NONE"}) == (
        200, {"compatibility": "NONE"})
    assert call(f"{url}/config/{qualified}?defaultToGlobal=true") == (200, {"compatibilityLevel": "NONE"})
    assert call(f"{url}/subjects/{qualified}/versions", "POST", incompatible)[0] == 200
    assert call(f"{url}/subjects/{name}/versions", "POST", incompatible)[1]["error_code"] == 409

    # an unqualified reference names a subject of the referrer's context
    address = {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]}
    call(f"{url}/subjects/:{context}:address/versions", "POST", {"schema": json.dumps(address)})
    customer = {"type": "record", "name": "Customer", "fields": [{"name": "address", "type": "Address"}]}
    status, referring = call(f"{url}/subjects/:{context}:customer/versions", "POST", {
        "schema": json.dumps(customer), "references": [{"name": "Address", "subject": "address", "version": 1}]})
    assert status == 200
    assert call(f"{url}/subjects/:{context}:address/versions/1/referencedby") == (200, [referring["id"]])

    # confluent-kafka's client with the context's base path as its URL
    client = SchemaRegistryClient({"url": f"{url}/contexts/{other}"})
    schema_id = client.register_schema("orders-value", Schema('"string"', "AVRO"))
    assert schema_id == 1 and client.get_schema(schema_id).schema_str == '"string"'
    assert call(f"{url}/subjects/:{other}:orders-value/versions/1")[1]["id"] == 1
    assert other in call(f"{url}/contexts")[1]


def test_state_survives_restart_and_instances_agree(registry_broker, registry_factory) -> None:
    topic = f"_schemas_{uuid.uuid4().hex[:6]}"
    group = f"registry-{uuid.uuid4().hex[:6]}"
    first = registry_factory(registry_broker.bootstrap_servers, topic, group_id=group)
    subject = subject_name()
    status, registered = call(f"{first.url}/subjects/{subject}/versions", "POST", avro({"name": "a", "type": "int"}))
    assert status == 200
    call(f"{first.url}/config/{subject}", "PUT", {"compatibility": "FULL"})

    second = registry_factory(registry_broker.bootstrap_servers, topic, group_id=group)
    assert call(f"{second.url}/subjects/{subject}/versions/1")[1]["id"] == registered["id"]
    assert call(f"{second.url}/config/{subject}") == (200, {"compatibilityLevel": "FULL"})
    # a write sent to either instance is made by the primary and seen by both, with one sequence of ids
    status, via_second = call(f"{second.url}/subjects/{subject}/versions", "POST",
                              avro({"name": "a", "type": "int"}, {"name": "b", "type": "int", "default": 0}))
    assert status == 200 and via_second["version"] == 2 and via_second["id"] > registered["id"]
    # read your writes: the instance written to answers with the write, whichever instance made it
    assert call(f"{second.url}/subjects/{subject}/versions") == (200, [1, 2])
    # the other instance reads it from _schemas soon after (reads on instances are eventually consistent)
    assert eventually(lambda: call(f"{first.url}/subjects/{subject}/versions") == (200, [1, 2]))
    assert call(f"{first.url}/subjects/{subject}/versions", "POST",
                avro({"name": "a", "type": "string"}))[0] == 409  # FULL, checked by the primary

    # the primary is the member the group gave _schemas' partition; its client.id is its URL
    admin = AdminClient({"bootstrap.servers": registry_broker.bootstrap_servers})
    members = admin.describe_consumer_groups([group])[group].result(30).members
    primary_url = next(member.client_id for member in members if member.assignment.topic_partitions)
    primary, survivor = (first, second) if primary_url == first.url else (second, first)
    assert primary.url == primary_url
    primary.kill()  # the survivor serves reads at once, and writes once the group makes it primary
    other_subject = subject_name()
    status, after = call(f"{survivor.url}/subjects/{other_subject}/versions", "POST",
                         avro({"name": "z", "type": "int"}))
    assert status == 200 and after["id"] > via_second["id"]

    survivor.stop()  # SIGTERM: it leaves the group on its way out (no member left to time out)
    assert survivor.process.returncode == 143
    assert admin.describe_consumer_groups([group])[group].result(30).members == []
    restarted = registry_factory(registry_broker.bootstrap_servers, topic, group_id=group)
    assert call(f"{restarted.url}/subjects/{subject}/versions") == (200, [1, 2])
    assert call(f"{restarted.url}/subjects/{other_subject}/versions/1")[1]["id"] == after["id"]
