"""AlterClientQuotas through the controller (over a real embedded metadata log) and DescribeClientQuotas from the
image: Kafka's validation messages, validate_only, removal, persistence across a reopen, and the filters."""

from __future__ import annotations

import pytest

from kfk.common.client_quotas import ClientQuotaEntity
from kfk.controller.client_quota_control import describe_client_quotas
from kfk.errors import ErrorCode, InvalidRequestError, UnsupportedVersionError
from kfk.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from kfk.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest

Alter = AlterClientQuotasRequest
Component = DescribeClientQuotasRequest.ComponentData


def entry(parts: list[tuple[str, str | None]], **ops: float | None) -> Alter.EntryData:
    return Alter.EntryData(entity=[Alter.EntityData(entity_type=kind, entity_name=name) for kind, name in parts],
                           ops=[Alter.OpData(key=key, value=value or 0.0, remove=value is None)
                                for key, value in ops.items()])


def alter(cluster, *entries: Alter.EntryData, validate_only: bool = False) -> list[tuple[int, str | None]]:
    response = cluster.run(cluster.controller.alter_client_quotas(Alter(entries=list(entries),
                                                                        validate_only=validate_only)))
    return [(result.error_code, result.error_message) for result in response.entries]


def entity(*parts: tuple[str, str | None]) -> ClientQuotaEntity:
    return ClientQuotaEntity.of(parts)


OK = (ErrorCode.NONE, None)


def test_set_change_remove_and_persist(cluster) -> None:
    assert alter(cluster, entry([("client-id", "c1")], producer_byte_rate=1024, request_percentage=50.5),
                 entry([("user", None)], consumer_byte_rate=2048),
                 entry([("user", "alice"), ("client-id", None)], controller_mutation_rate=3)) == [OK, OK, OK]
    assert dict(cluster.image.client_quotas) == {
        entity(("client-id", "c1")): {"producer_byte_rate": 1024.0, "request_percentage": 50.5},
        entity(("user", None)): {"consumer_byte_rate": 2048.0},
        entity(("user", "alice"), ("client-id", None)): {"controller_mutation_rate": 3.0}}
    assert alter(cluster, entry([("client-id", "c1")], producer_byte_rate=4096, request_percentage=None)) == [OK]
    assert alter(cluster, entry([("user", None)], consumer_byte_rate=None)) == [OK]
    cluster.reopen()  # replayed from the metadata log
    assert dict(cluster.image.client_quotas) == {
        entity(("client-id", "c1")): {"producer_byte_rate": 4096.0},
        entity(("user", "alice"), ("client-id", None)): {"controller_mutation_rate": 3.0}}


def test_validate_only_writes_nothing(cluster) -> None:
    assert alter(cluster, entry([("client-id", "c1")], producer_byte_rate=1024), validate_only=True) == [OK]
    assert dict(cluster.image.client_quotas) == {}


@pytest.mark.parametrize(("parts", "ops", "message"), [
    ([], {"producer_byte_rate": 1}, "Invalid empty client quota entity"),
    ([("group", "g")], {"producer_byte_rate": 1}, "Unhandled client quota entity type: group"),
    ([("user", "")], {"producer_byte_rate": 1}, "Empty user not supported"),
    ([("user", "a"), ("user", "b")], {"producer_byte_rate": 1},
     "Invalid client quota entity, duplicate entity entry user"),
    ([("ip", "1.2.3.4"), ("user", "a")], {"connection_creation_rate": 1}, "IP entity should"),
    ([("client-id", "c")], {"bogus": 1}, "Invalid configuration key bogus"),
    ([("client-id", "c")], {"connection_creation_rate": 1}, "Invalid configuration key connection_creation_rate"),
    ([("ip", "1.2.3.4")], {"producer_byte_rate": 1}, "Invalid configuration key producer_byte_rate"),
    ([("client-id", "c")], {"producer_byte_rate": -5}, "Quota producer_byte_rate must be greater than 0"),
    ([("client-id", "c")], {"producer_byte_rate": 1.5}, "producer_byte_rate cannot be a fractional value."),
    ([("client-id", "c")], {"producer_byte_rate": 2.0**64},
     "Proposed value for producer_byte_rate is too large for a LONG."),
    ([("ip", None)], {"connection_creation_rate": 2.0**32},
     "Proposed value for connection_creation_rate is too large for an INT."),
])
def test_invalid_alterations_are_refused_with_kafkas_message(cluster, parts, ops, message) -> None:
    [(code, text)] = alter(cluster, entry(parts, **ops))
    assert code == ErrorCode.INVALID_REQUEST and message in text
    assert dict(cluster.image.client_quotas) == {}


def test_a_failing_entity_does_not_stop_the_others(cluster) -> None:
    results = alter(cluster, entry([("client-id", "good")], producer_byte_rate=10),
                    entry([("client-id", "bad")], producer_byte_rate=10, bogus=1),
                    entry([("client-id", "good")], consumer_byte_rate=10))
    assert results[0] == OK and results[1][0] == results[2][0] == ErrorCode.INVALID_REQUEST
    assert results[2][1].startswith("Ignoring duplicate entity")
    assert dict(cluster.image.client_quotas) == {entity(("client-id", "good")): {"producer_byte_rate": 10.0}}


def describe(cluster, *components: tuple[str, int, str | None], strict: bool = False) -> dict:
    response = describe_client_quotas(cluster.image, DescribeClientQuotasRequest(
        components=[Component(entity_type=kind, match_type=match_type, match=match)
                    for kind, match_type, match in components], strict=strict))
    return {ClientQuotaEntity.of((part.entity_type, part.entity_name) for part in found.entity):
            {value.key: value.value for value in found.values} for found in response.entries}


def test_describe_filters(cluster) -> None:
    alter(cluster, entry([("client-id", "c1")], producer_byte_rate=1),
          entry([("client-id", None)], producer_byte_rate=2),
          entry([("user", "alice")], producer_byte_rate=3),
          entry([("user", "alice"), ("client-id", "c1")], producer_byte_rate=4),
          entry([("ip", "10.0.0.1")], connection_creation_rate=5))
    EXACT, DEFAULT, SPECIFIED = 0, 1, 2
    assert len(describe(cluster)) == 5
    assert set(describe(cluster, ("client-id", EXACT, "c1"))) == {
        entity(("client-id", "c1")), entity(("user", "alice"), ("client-id", "c1"))}
    assert set(describe(cluster, ("client-id", EXACT, "c1"), strict=True)) == {entity(("client-id", "c1"))}
    assert set(describe(cluster, ("client-id", DEFAULT, None))) == {entity(("client-id", None))}
    assert set(describe(cluster, ("client-id", SPECIFIED, None), strict=True)) == {
        entity(("client-id", "c1")), entity(("client-id", None))}
    assert set(describe(cluster, ("user", SPECIFIED, None), ("client-id", SPECIFIED, None))) == {
        entity(("user", "alice"), ("client-id", "c1"))}
    assert describe(cluster, ("ip", EXACT, "10.0.0.1")) == {entity(("ip", "10.0.0.1")):
                                                           {"connection_creation_rate": 5.0}}


@pytest.mark.parametrize(("components", "error", "message"), [
    ([("", 0, "x")], InvalidRequestError, "Invalid empty entity type."),
    ([("user", 0, "a"), ("user", 2, None)], InvalidRequestError, "Entity type user cannot appear more than once"),
    ([("group", 0, "g")], UnsupportedVersionError, "Unsupported entity type group"),
    ([("user", 0, None)], InvalidRequestError, "MATCH_TYPE_EXACT, but set match string to null"),
    ([("user", 1, "a")], InvalidRequestError, "MATCH_TYPE_DEFAULT, but also specified a match string"),
    ([("user", 2, "a")], InvalidRequestError, "MATCH_TYPE_SPECIFIED, but also specified a match string"),
    ([("user", 7, None)], UnsupportedVersionError, "Unknown match type 7"),
    ([("ip", 2, None), ("user", 2, None)], InvalidRequestError, "IP filter component should not be used"),
])
def test_bad_filters_are_refused(cluster, components, error, message) -> None:
    with pytest.raises(error, match=message):
        describe(cluster, *components)
