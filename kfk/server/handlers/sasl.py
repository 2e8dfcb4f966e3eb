"""SaslHandshake (key 17, v0-1) and SaslAuthenticate (key 36, v0-2) where no authentication is under way.

On a SASL listener the connection's SaslAuthenticator (kfk/server/sasl_authenticator.py) serves both while it
authenticates; these handlers answer everywhere else, as Kafka's request handler does: on a PLAINTEXT or SSL
listener, and a SaslAuthenticate on a connection already authenticated, get ILLEGAL_SASL_STATE.

SaslHandshake v1 means the tokens follow in SaslAuthenticate requests (KIP-152), v0 that they follow as raw frames.
SaslAuthenticate v1 adds session_lifetime_ms (KIP-368); v2 is flexible.
"""

from __future__ import annotations

from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kfk.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kfk.server.dispatch import Dispatcher, RequestContext


class SaslHandler:
    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.SASL_HANDSHAKE, self.sasl_handshake)
        dispatcher.register(ApiKey.SASL_AUTHENTICATE, self.sasl_authenticate)

    async def sasl_handshake(self, context: RequestContext, request: SaslHandshakeRequest) -> SaslHandshakeResponse:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])

    async def sasl_authenticate(self, context: RequestContext,
                                request: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                        error_message="SaslAuthenticate request received after successful "
                                                      "authentication")
