"""The served versions table and the dispatcher's registry: what ApiVersions advertises is what is served."""

from __future__ import annotations

import asyncio

import pytest

from kfk.errors import ErrorCode
from kfk.protocol.apis import SCHEMA_VERSIONS, VersionRange
from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest
from kfk.common.client_quotas import ClientQuotaEntity
from kfk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kfk.security.quotas import ClientQuotaManagers
from kfk.server.dispatch import NOT_SERVED, SERVED_VERSIONS, CloseConnection, Dispatcher, RequestContext
from kfk.server.handlers.api_versions import ApiVersionsHandler


async def answer(context: RequestContext, request: object) -> None:
    return None


def frame(api_key: ApiKey, version: int, message) -> bytes:
    header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=5, client_id="t")
    return encode_request(header, message)[4:]


def api_versions(dispatcher: Dispatcher, version: int, answered_at: int,
                 request: ApiVersionsRequest | None = None):
    """The ApiVersions response to a request at `version`, decoded at the version it is `answered_at`."""
    request = request or ApiVersionsRequest(client_software_name="kfk-tests", client_software_version="1.0")
    chunks = asyncio.run(dispatcher.dispatch(frame(ApiKey.API_VERSIONS, version, request),
                                             "127.0.0.1", 1, "PLAINTEXT"))
    data = b"".join(bytes(chunk) for chunk in chunks)
    return decode_response(data[4:], ApiKey.API_VERSIONS, answered_at)[1]


def test_every_row_of_the_table_is_within_the_generated_schema() -> None:
    dispatcher = Dispatcher()
    for api_key in SERVED_VERSIONS:
        dispatcher.register(api_key, answer)
    dispatcher.check_every_api_has_a_handler()


def test_the_table_advertises_one_release_s_highest_versions() -> None:
    # Clients (kafka-python) infer the broker's release from the highest versions: they are the vendored release's.
    assert {key: versions.highest for key, versions in SERVED_VERSIONS.items()} == {
        key: SCHEMA_VERSIONS[key].highest for key in SERVED_VERSIONS}


def test_an_api_without_a_row_cannot_be_registered() -> None:
    dispatcher = Dispatcher({ApiKey.API_VERSIONS: VersionRange(0, 4)})
    with pytest.raises(ValueError, match="END_TXN"):
        dispatcher.register(ApiKey.END_TXN, answer)


def test_an_api_registered_twice_or_beyond_its_schema_fails() -> None:
    dispatcher = Dispatcher({ApiKey.METADATA: VersionRange(0, 12), ApiKey.FETCH: VersionRange(0, 99)})
    dispatcher.register(ApiKey.METADATA, answer)
    with pytest.raises(ValueError, match="twice"):
        dispatcher.register(ApiKey.METADATA, answer)
    with pytest.raises(ValueError, match="outside the schema"):
        dispatcher.register(ApiKey.FETCH, answer)


def test_a_row_without_a_handler_is_refused_at_start_up() -> None:
    served = {ApiKey.API_VERSIONS: VersionRange(0, 4), ApiKey.METADATA: VersionRange(0, 12)}
    dispatcher = Dispatcher(served)
    ApiVersionsHandler(served).register(dispatcher)
    with pytest.raises(ValueError, match="METADATA"):
        dispatcher.check_every_api_has_a_handler()
    dispatcher.register(ApiKey.METADATA, answer)
    dispatcher.check_every_api_has_a_handler()


def test_api_versions_answers_the_table_sorted_by_key() -> None:
    served = {ApiKey.METADATA: VersionRange(1, 12), ApiKey.API_VERSIONS: VersionRange(0, 4),
              ApiKey.PRODUCE: VersionRange(3, 11)}
    dispatcher = Dispatcher(served)
    ApiVersionsHandler(served).register(dispatcher)
    response = api_versions(dispatcher, 3, 3)
    assert response.error_code == ErrorCode.NONE
    assert [(e.api_key, e.min_version, e.max_version) for e in response.api_keys] == [
        (ApiKey.PRODUCE, 3, 11), (ApiKey.METADATA, 1, 12), (ApiKey.API_VERSIONS, 0, 4)]


def test_api_versions_refuses_a_client_software_name_or_version_of_the_wrong_shape() -> None:
    served = {ApiKey.API_VERSIONS: VersionRange(0, 4)}
    dispatcher = Dispatcher(served)
    ApiVersionsHandler(served).register(dispatcher)
    for name, version in [("bad name!", "1.0"), ("kfk", "1.0-"), ("", "1.0"), ("kfk", "")]:
        response = api_versions(dispatcher, 3, 3, ApiVersionsRequest(client_software_name=name,
                                                                     client_software_version=version))
        assert (response.error_code, response.api_keys) == (ErrorCode.INVALID_REQUEST, [])
    assert api_versions(dispatcher, 2, 2, ApiVersionsRequest()).error_code == ErrorCode.NONE  # no names before v3


def test_a_version_outside_the_table_is_refused() -> None:
    served = {ApiKey.API_VERSIONS: VersionRange(0, 2), ApiKey.METADATA: VersionRange(4, 12)}
    dispatcher = Dispatcher(served)
    ApiVersionsHandler(served).register(dispatcher)
    dispatcher.register(ApiKey.METADATA, answer)
    # ApiVersions above our range: answered at v0 with UNSUPPORTED_VERSION and our own range (KIP-511).
    response = api_versions(dispatcher, 3, 0)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(e.api_key, e.min_version, e.max_version) for e in response.api_keys] == [(ApiKey.API_VERSIONS, 0, 2)]
    # Any other API: the connection is closed.
    with pytest.raises(CloseConnection, match="unsupported version 3 of METADATA"):
        asyncio.run(dispatcher.dispatch(frame(ApiKey.METADATA, 3, MetadataRequest(topics=None)),
                                        "127.0.0.1", 1, "PLAINTEXT"))


# --- fast handlers ------------------------------------------------------------------------------------------------------

def metadata_dispatcher(fast, quotas: ClientQuotaManagers | None = None) -> tuple[Dispatcher, list[str]]:
    """A dispatcher serving Metadata with a generic handler that records its calls, and `fast`."""
    calls: list[str] = []

    async def generic(context: RequestContext, request: MetadataRequest) -> MetadataResponse:
        calls.append("generic")
        return MetadataResponse(throttle_time_ms=7)

    dispatcher = Dispatcher({ApiKey.METADATA: VersionRange(12, 12)}, quotas)
    dispatcher.register(ApiKey.METADATA, generic, fast)
    return dispatcher, calls


def dispatch_metadata(dispatcher: Dispatcher, on_throttle=None) -> list | None:
    return asyncio.run(dispatcher.dispatch(frame(ApiKey.METADATA, 12, MetadataRequest(topics=None)), "127.0.0.1", 1,
                                           "PLAINTEXT", on_throttle=on_throttle))


def test_a_fast_handler_answers_its_requests_from_the_frame_and_leaves_the_others_to_the_generic_handler() -> None:
    seen: list[tuple[int, int]] = []

    async def fast(context: RequestContext, frame_: bytes, position: int) -> list | None:
        seen.append((context.header.correlation_id, position))
        if len(seen) == 1:
            context.throttle_time_ms = 30
            return [b"fast answer"]
        return NOT_SERVED

    dispatcher, calls = metadata_dispatcher(fast)
    throttled: list[int] = []
    assert dispatch_metadata(dispatcher, throttled.append) == [b"fast answer"]
    assert calls == [] and throttled == [30]
    chunks = dispatch_metadata(dispatcher)
    assert calls == ["generic"] and seen == [(5, 12), (5, 12)]  # header v2 with client id "t": 12 bytes
    assert decode_response(b"".join(chunks)[4:], ApiKey.METADATA, 12) == (5, MetadataResponse(throttle_time_ms=7))


def test_a_fast_handler_is_skipped_while_a_request_quota_times_handlers_and_once_the_handler_is_wrapped() -> None:
    async def fast(context: RequestContext, frame_: bytes, position: int) -> list | None:
        return [b"fast answer"]

    quotas = ClientQuotaManagers(11, 1)
    quotas.update({ClientQuotaEntity.of([("client-id", None)]): {"request_percentage": 1000.0}})
    dispatcher, calls = metadata_dispatcher(fast, quotas)
    dispatch_metadata(dispatcher)
    assert calls == ["generic"]
    dispatcher, calls = metadata_dispatcher(fast)
    dispatcher.wrap(ApiKey.METADATA, lambda handler: handler)
    dispatch_metadata(dispatcher)
    assert calls == ["generic"]


def test_a_failing_fast_handler_closes_the_connection() -> None:
    async def fast(context: RequestContext, frame_: bytes, position: int) -> list | None:
        raise RuntimeError("a bug")

    dispatcher, calls = metadata_dispatcher(fast)
    with pytest.raises(CloseConnection, match="METADATA handler failed: a bug"):
        dispatch_metadata(dispatcher)
    assert calls == []
