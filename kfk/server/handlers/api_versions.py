"""ApiVersions (key 18), v0-v4.

v1 adds throttle_time_ms; v3 is flexible and carries the client's software name and version (KIP-511); v4 only
changes the rules of the SupportedFeatures tagged field. The answer is the served versions table (SERVED_VERSIONS in
kfk/server/dispatch.py), every row of which the broker checks has a handler. A request of a version we do not serve
reaches here with no body and is answered at v0 with UNSUPPORTED_VERSION and our own ApiVersions range, so the
client can retry with a version both sides know.

No finalized features are advertised: in particular `transaction.version` is not finalized at 2, so clients end
transactions the TV1 way (the vendored schemas predate the stable EndTxn v5; see handlers/transactions.py).
"""

from __future__ import annotations

from typing import Mapping

from kfk.errors import ErrorCode
from kfk.protocol.apis import VersionRange
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.server.dispatch import Dispatcher, RequestContext

ApiVersion = ApiVersionsResponse.ApiVersion


class ApiVersionsHandler:
    def __init__(self, served_versions: Mapping[ApiKey, VersionRange]) -> None:
        self.served_versions = served_versions

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.API_VERSIONS, self.api_versions)

    async def api_versions(self, context: RequestContext,
                           request: ApiVersionsRequest | None) -> ApiVersionsResponse:
        if request is None:
            own = self.served_versions[ApiKey.API_VERSIONS]
            return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
                ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=own.lowest, max_version=own.highest)])
        return ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=[
            ApiVersion(api_key=api_key, min_version=versions.lowest, max_version=versions.highest)
            for api_key, versions in sorted(self.served_versions.items())])
