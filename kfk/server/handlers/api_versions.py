"""ApiVersions (key 18), v0-v4.

v1 adds throttle_time_ms; v3 is flexible and carries the client's software name and version (KIP-511); v4 only
changes the rules of the SupportedFeatures tagged field. The answer comes from the dispatch registry, so it lists
exactly the handlers this broker has. A request of a version we do not serve reaches here with no body and is
answered at v0 with UNSUPPORTED_VERSION and our own ApiVersions range, so the client can retry with a version both
sides know.
"""

from __future__ import annotations

from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.server.dispatch import Dispatcher, RequestContext

LOWEST_VERSION = 0
HIGHEST_VERSION = 4

ApiVersion = ApiVersionsResponse.ApiVersion


def register(dispatcher: Dispatcher) -> None:
    async def handle(context: RequestContext, request: ApiVersionsRequest | None) -> ApiVersionsResponse:
        if request is None:
            own = ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=LOWEST_VERSION, max_version=HIGHEST_VERSION)
            return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[own])
        return ApiVersionsResponse(
            error_code=ErrorCode.NONE,
            api_keys=[
                ApiVersion(api_key=r.api_key, min_version=r.lowest_version, max_version=r.highest_version)
                for r in dispatcher.registrations
            ],
        )

    dispatcher.register(ApiKey.API_VERSIONS, LOWEST_VERSION, HIGHEST_VERSION, handle)
