"""ApiVersions (key 18), v0-v5.

v1 adds throttle_time_ms; v3 is flexible and carries the client's software name and version (KIP-511); v4 only
changes the rules of the SupportedFeatures tagged field (a feature whose versions start at 0 is listed from v4); v5
(KIP-1242) carries the cluster id and node id the client means to reach, both or neither (one alone is
INVALID_REQUEST): a broker of another cluster, or another node, answers REBOOTSTRAP_REQUIRED (the client's metadata
is stale) and lists no versions. The answer is the served versions table (SERVED_VERSIONS in
kfk/server/dispatch.py), every row of which the broker checks has a handler. A request of a version we do not serve
reaches here with no body and is answered at v0 with UNSUPPORTED_VERSION and our own ApiVersions range, so the
client can retry with a version both sides know.

From v3 the answer also carries features (KIP-584), as tagged fields, as Kafka's broker fills them: the levels this
node supports (controller/features.py: metadata.version, kraft.version, transaction.version) and the cluster's
finalized levels from the metadata image this node has applied, with that image's offset as their epoch (a client
keeps the answer with the newest epoch); kraft.version is the quorum's, listed once it is above 0. A cluster
formatted by kfk finalizes transaction.version 2, as a Kafka 4 cluster does by default, so that clients run
transaction protocol version 2 (KIP-890 part 2). Fields at their defaults stay off the wire (the codec omits them).

A v3+ request whose client software name or version is not Kafka's shape (letters, digits, '-' and '.', starting
and ending with a letter or digit) is answered INVALID_REQUEST with no versions, as Kafka does.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

from kfk.common.features import KRAFT_VERSION_FEATURE_NAME
from kfk.controller.features import supported_features
from kfk.errors import ErrorCode
from kfk.metadata.image import MetadataImage
from kfk.protocol.apis import VersionRange
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.server.dispatch import Dispatcher, RequestContext

ApiVersion = ApiVersionsResponse.ApiVersion

#: ApiVersions from this version carries the features, and the client's software name and version.
FIRST_FEATURES_VERSION = 3
#: Supported features whose lowest version is 0 are listed from this version on (KIP-1022): a v3 client's parser
#: (Kafka's before 3.9) refuses a range starting at 0.
FIRST_ZERO_MIN_FEATURES_VERSION = 4
#: ApiVersions from this version names the cluster and node the client means to reach (KIP-1242).
FIRST_IDENTITY_VERSION = 5
#: What a client software name or version may look like (KIP-511).
_SOFTWARE_NAME_OR_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiVersionsHandler:
    """`image` and `kraft_version` give the finalized features; `cluster_id` and `node_id` are this node's (None and
    -1: unknown, nothing is checked)."""

    def __init__(self, served_versions: Mapping[ApiKey, VersionRange],
                 image: Callable[[], MetadataImage | None] = lambda: None,
                 kraft_version: Callable[[], int] = lambda: 0, cluster_id: str | None = None,
                 node_id: int = -1) -> None:
        self.served_versions = served_versions
        self.image = image
        self.kraft_version = kraft_version
        self.cluster_id = cluster_id
        self.node_id = node_id

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.API_VERSIONS, self.api_versions)

    async def api_versions(self, context: RequestContext,
                           request: ApiVersionsRequest | None) -> ApiVersionsResponse:
        if request is None:
            own = self.served_versions[ApiKey.API_VERSIONS]
            return ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
                ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=own.lowest, max_version=own.highest)])
        if context.api_version >= FIRST_FEATURES_VERSION and not all(
                _SOFTWARE_NAME_OR_VERSION.fullmatch(text)
                for text in (request.client_software_name, request.client_software_version)):
            return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
        if context.api_version >= FIRST_IDENTITY_VERSION:
            if (request.cluster_id is None) != (request.node_id < 0):
                return ApiVersionsResponse(error_code=ErrorCode.INVALID_REQUEST)
            if self._meant_for_another_node(request):
                return ApiVersionsResponse(error_code=ErrorCode.REBOOTSTRAP_REQUIRED)
        response = ApiVersionsResponse(error_code=ErrorCode.NONE, api_keys=[
            ApiVersion(api_key=api_key, min_version=versions.lowest, max_version=versions.highest)
            for api_key, versions in sorted(self.served_versions.items())])
        if context.api_version >= FIRST_FEATURES_VERSION:
            self._add_features(response, context.api_version)
        return response

    def _add_features(self, response: ApiVersionsResponse, api_version: int) -> None:
        response.supported_features = [
            ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=lowest, max_version=highest)
            for name, (lowest, highest) in supported_features().items()
            if lowest > 0 or api_version >= FIRST_ZERO_MIN_FEATURES_VERSION]
        image = self.image()
        if image is None or not image.features:
            return  # nothing finalized yet (a node that has not read the metadata): Kafka's epoch -1, no levels
        finalized = dict(image.features)
        if self.kraft_version() > 0:
            finalized[KRAFT_VERSION_FEATURE_NAME] = self.kraft_version()
        response.finalized_features_epoch = image.offset
        response.finalized_features = [
            ApiVersionsResponse.FinalizedFeatureKey(name=name, min_version_level=level, max_version_level=level)
            for name, level in sorted(finalized.items())]

    def _meant_for_another_node(self, request: ApiVersionsRequest) -> bool:
        """Whether the cluster id and node id the client gave (if it gave them) are not this node's."""
        if request.cluster_id is None:
            return False
        other_cluster = self.cluster_id is not None and request.cluster_id != self.cluster_id
        return other_cluster or (self.node_id >= 0 and request.node_id != self.node_id)
