"""ControllerChannel when no controller answers: the request is retried until its timeout, and the reason it waits
(no controller known, no address for it, not the controller any more) is logged once it has waited a while and given
in the timeout's message, so a forwarded request that hangs says why in the broker's log."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kfk.errors import KafkaTimeoutError
from kfk.protocol.messages.create_acls import CreateAclsRequest
from kfk.server import controller_channel
from kfk.server.controller_channel import ControllerChannel


@pytest.mark.parametrize("active, reason", [(None, "no active controller is known"),
                                            (2, "controller 2 has no known address")])
def test_a_request_nobody_answers_says_why(monkeypatch, caplog, active, reason) -> None:
    monkeypatch.setattr(controller_channel, "SLOW_REQUEST_WARNING_S", 0.1)
    channel = ControllerChannel(1, lambda: active, lambda node_id: None, request_timeout_ms=400)
    with caplog.at_level(logging.WARNING, logger="kfk.server.controller_channel"):
        with pytest.raises(KafkaTimeoutError, match=f"within 400 ms \\({reason}\\)"):
            asyncio.run(channel.send(CreateAclsRequest(creations=[]), 3))
    warnings = [record.getMessage() for record in caplog.records]
    assert len(warnings) == 1 and warnings[0].startswith("CreateAclsRequest to the controller still unanswered after")
    assert warnings[0].endswith(reason)
