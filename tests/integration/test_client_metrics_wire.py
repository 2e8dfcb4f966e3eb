"""ListClientMetricsResources over a raw socket: kfk keeps no client-metrics configs, so the list is empty."""

from __future__ import annotations

import pytest

from kfk.common.config_types import ConfigResourceType
from kfk.errors import ErrorCode
from kfk.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kfk.protocol.messages.list_config_resources import ListConfigResourcesRequest
from tests.integration.wire import api_versions_request, connect, request

pytestmark = pytest.mark.integration

Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
Alterable = IncrementalAlterConfigsRequest.AlterableConfig


def test_list_client_metrics_resources_is_advertised_and_answers_an_empty_list(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        versions = {key.api_key: key for key in request(sock, api_versions_request(), 3).api_keys}
        assert (versions[74].min_version, versions[74].max_version) == (0, 1)
        # the controller refuses CLIENT_METRICS resources, so none can appear in the list
        (result,) = request(sock, IncrementalAlterConfigsRequest(resources=[Resource(
            resource_type=ConfigResourceType.CLIENT_METRICS, resource_name="all-clients",
            configs=[Alterable(name="metrics", config_operation=0, value="*")])]), 1).responses
        assert result.error_code == ErrorCode.INVALID_REQUEST
        response = request(sock, ListConfigResourcesRequest(), 0)
        assert (response.error_code, response.config_resources) == (ErrorCode.NONE, [])
