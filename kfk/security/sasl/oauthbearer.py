"""SASL/OAUTHBEARER (RFC 7628, Kafka's KIP-255 and KIP-768): the client sends a bearer token, a JWT; the broker
validates it and takes the principal from its subject claim.

Two validators, as in Kafka:
- `UnsecuredJwsValidator`, for development: tokens with `"alg":"none"` and no signature (Kafka's
  OAuthBearerUnsecuredValidatorCallbackHandler, the default when no JWKS is configured; librdkafka's
  `enable.sasl.oauthbearer.unsecure.jwt` and Java's OAuthBearerUnsecuredLoginCallbackHandler make such tokens).
- `JwtValidator`: a signed JWT (RS256/384/512, PS256/384/512, ES256/384/512) checked against the keys of a JWKS
  (`sasl.oauthbearer.jwks.endpoint.url`), with `exp`, `iat` and the subject claim required and, when configured,
  the audience (`sasl.oauthbearer.expected.audience`) and issuer (`sasl.oauthbearer.expected.issuer`).
An invalid token is answered, as Kafka does, with a JSON error challenge (`{"status":"invalid_token"}`); the client
acknowledges it with a single 0x01 and the broker then fails the authentication with that JSON as the message.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kfk.errors import SaslAuthenticationError
from kfk.security.sasl import OAUTHBEARER, SaslException

_SEPARATOR = "\x01"
_CLIENT_RESPONSE = re.compile(r"n,(?:a=(?P<authzid>[^,]+))?,(?P<kvpairs>(?:\x01[A-Za-z]+=[\x21-\x7e \t\r\n]+)*)"
                              r"\x01\x01")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_.a-zA-Z0-9]+)")


class TokenValidationError(Exception):
    """A token the validator refuses; `status` goes into the JSON error challenge (RFC 7628's status)."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.scope = scope


@dataclass(frozen=True, slots=True)
class BearerToken:
    value: str
    principal_name: str
    lifetime_ms: int
    scope: frozenset[str] = field(default_factory=frozenset)


class TokenValidator(Protocol):
    def validate(self, token: str) -> BearerToken: ...


def b64url_decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise TokenValidationError("malformed base64url in the token") from None


def b64url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _json_part(text: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(b64url_decode(text))
    except (UnicodeDecodeError, ValueError):
        raise TokenValidationError(f"the token's {what} is not JSON") from None
    if not isinstance(value, dict):
        raise TokenValidationError(f"the token's {what} is not a JSON object")
    return value


def _time_ms(claims: Mapping[str, Any], name: str, required: bool) -> int | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenValidationError(f"Required claim missing: {name}")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenValidationError(f"The {name} claim is not a number")
    return int(value * 1000)


def _scope(claims: Mapping[str, Any], name: str) -> frozenset[str]:
    value = claims.get(name)
    if value is None:
        return frozenset()
    if isinstance(value, str):
        return frozenset(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return frozenset(value)
    raise TokenValidationError(f"The {name} claim is neither a string nor a list of strings")


def _check_times(claims: Mapping[str, Any], now_ms: int, skew_ms: int) -> int:
    """exp (required) not passed and iat (when present) not in the future, both within the allowed skew; returns
    exp in ms."""
    expiration_ms = _time_ms(claims, "exp", required=True)
    assert expiration_ms is not None
    issued_at_ms = _time_ms(claims, "iat", required=False)
    if now_ms > expiration_ms + skew_ms:
        raise TokenValidationError(f"The indicated time ({now_ms} ms) is beyond the Expiration Time "
                                   f"({expiration_ms} ms)")
    if issued_at_ms is not None:
        if issued_at_ms > now_ms + skew_ms:
            raise TokenValidationError(f"The Issued At value ({issued_at_ms} ms) is after the indicated time "
                                       f"({now_ms} ms)")
        if expiration_ms <= issued_at_ms:
            raise TokenValidationError(f"The Expiration Time ({expiration_ms} ms) is not after the Issued At time "
                                       f"({issued_at_ms} ms)")
    return expiration_ms


def _principal(claims: Mapping[str, Any], name: str) -> str:
    principal = claims.get(name)
    if not isinstance(principal, str) or not principal.strip():
        raise TokenValidationError(f"Required claim missing or empty: {name}")
    return principal


class UnsecuredJwsValidator:
    """Kafka's unsecured validator and its JAAS options: unsecuredValidatorPrincipalClaimName (sub),
    unsecuredValidatorScopeClaimName (scope), unsecuredValidatorRequiredScope, unsecuredValidatorAllowableClockSkewMs.
    """

    def __init__(self, options: Mapping[str, str] | None = None, clock_ms: Callable[[], int] | None = None) -> None:
        options = options or {}
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self.required_scope = frozenset(options.get("unsecuredValidatorRequiredScope", "").split())
        self.skew_ms = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0"))
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    def validate(self, token: str) -> BearerToken:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenValidationError(f"Unsecured JWS compact serializations must have 3 dot-separated Base64URL-"
                                       f"encoded values: {len(parts)}")
        if parts[2]:
            raise TokenValidationError("Unsecured JWS compact serializations must have an empty signature")
        header, claims = _json_part(parts[0], "header"), _json_part(parts[1], "payload")
        if header.get("alg") != "none":
            raise TokenValidationError("Unsecured JWS must have \"alg\":\"none\"")
        expiration_ms = _check_times(claims, self._clock_ms(), self.skew_ms)
        scope = _scope(claims, self.scope_claim)
        missing = self.required_scope - scope
        if missing:
            raise TokenValidationError(f"The provided scope ({sorted(scope)}) was missing a required scope "
                                       f"({sorted(missing)})", "insufficient_scope", " ".join(sorted(missing)))
        return BearerToken(token, _principal(claims, self.principal_claim), expiration_ms, scope)


def unsecured_token(principal: str, lifetime_seconds: int = 3600, scope: list[str] | None = None,
                    now_ms: int | None = None, principal_claim: str = "sub") -> str:
    """An unsecured JWS for `principal` (what Java's unsecured login handler and librdkafka build for development)."""
    now = (int(time.time() * 1000) if now_ms is None else now_ms) / 1000
    claims: dict[str, Any] = {principal_claim: principal, "iat": now, "exp": now + lifetime_seconds}
    if scope:
        claims["scope"] = scope
    header = b64url_encode(json.dumps({"alg": "none"}).encode())
    return f"{header}.{b64url_encode(json.dumps(claims).encode())}."


class OAuthBearerServer:
    mechanism = OAUTHBEARER
    token_authenticated = False

    def __init__(self, validator: TokenValidator) -> None:
        self._validator = validator
        self._token: BearerToken | None = None
        self._error: str | None = None

    @property
    def complete(self) -> bool:
        return self._token is not None

    @property
    def authorization_id(self) -> str:
        return self._token.principal_name if self._token is not None else ""

    @property
    def credential_expiry_ms(self) -> int | None:
        return self._token.lifetime_ms if self._token is not None else None

    def evaluate_response(self, response: bytes) -> bytes:
        if response == _SEPARATOR.encode() and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        authorization_id, auth, _extensions = parse_client_response(response)
        scheme = _AUTH.fullmatch(auth)
        if scheme is None or scheme["scheme"].lower() != "bearer":
            raise SaslException(f"Invalid OAuth bearer value: {auth[:20]!r}")
        try:
            token = self._validator.validate(scheme["token"])
        except TokenValidationError as error:
            body: dict[str, str] = {"status": error.status}
            if error.scope:
                body["scope"] = error.scope
            self._error = json.dumps(body, separators=(",", ":"))
            return self._error.encode()
        if authorization_id and authorization_id != token.principal_name:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authorization_id}) that is different "
                f"from the token's principal name ({token.principal_name})")
        self._token = token
        return b""


def parse_client_response(response: bytes) -> tuple[str, str, dict[str, str]]:
    """The client's initial response: (authorization id, the `auth` value, the SASL extensions)."""
    match = _CLIENT_RESPONSE.fullmatch(response.decode("utf-8", errors="replace"))
    if match is None:
        raise SaslException("Invalid OAUTHBEARER client first message")
    pairs = dict(item.split("=", 1) for item in match["kvpairs"].split(_SEPARATOR) if item)
    auth = pairs.pop("auth", None)
    if auth is None:
        raise SaslException("Invalid OAUTHBEARER client first message: no auth key")
    return match["authzid"] or "", auth, pairs


def format_client_response(token: str, authorization_id: str = "", extensions: Mapping[str, str] | None = None) -> bytes:
    header = f"n,a={authorization_id}," if authorization_id else "n,,"
    pairs = "".join(f"{_SEPARATOR}{key}={value}" for key, value in (extensions or {}).items())
    return f"{header}{_SEPARATOR}auth=Bearer {token}{pairs}{_SEPARATOR}{_SEPARATOR}".encode()


class OAuthBearerClient:
    mechanism = OAUTHBEARER

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None) -> None:
        self._token = token
        self._extensions = extensions
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        return format_client_response(self._token, extensions=self._extensions)

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        if challenge:  # the broker's JSON error: acknowledge it, the broker then fails the authentication
            return _SEPARATOR.encode()
        self._complete = True
        return None
