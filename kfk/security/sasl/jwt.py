"""JWT validation against a JSON Web Key Set (KIP-768's broker-side validation), with the `cryptography` package.

`parse_jwks` turns a JWKS document into public keys by key id; `JwtValidator` checks a compact JWS: a signing
algorithm from the allowed list (RSA PKCS#1 v1.5, RSA-PSS, ECDSA; never `none` or HMAC, which would let a holder of
a public key forge tokens), a `kid` the JWKS knows (or the only key when the token names none), the signature, then
the claims Kafka requires (`exp`, `iat`, the subject claim) and, if configured, the expected audience and issuer.
Fetching the JWKS (a file or an HTTPS URL, refreshed) is the broker's job; this module only parses and checks.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from kfk.security.sasl.oauthbearer import (BearerToken, TokenValidationError, _check_times, _json_part, _principal,
                                           _scope, b64url_decode)

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey

_HASHES = {"256": hashes.SHA256, "384": hashes.SHA384, "512": hashes.SHA512}
_CURVES = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}
ALLOWED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")


def _int(text: str) -> int:
    return int.from_bytes(b64url_decode(text), "big")


def parse_jwks(text: str | bytes) -> dict[str | None, PublicKey]:
    """The signing keys of a JWKS document by `kid` (None for a key without one); keys of other types or uses
    are skipped. ValueError if the document is not a JWKS."""
    try:
        document = json.loads(text)
        entries = document["keys"]
    except (ValueError, KeyError, TypeError):
        raise ValueError("not a JWKS document (a JSON object with a \"keys\" list)") from None
    keys: dict[str | None, PublicKey] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        try:
            if entry.get("kty") == "RSA":
                keys[entry.get("kid")] = rsa.RSAPublicNumbers(_int(entry["e"]), _int(entry["n"])).public_key()
            elif entry.get("kty") == "EC" and entry.get("crv") in _CURVES:
                keys[entry.get("kid")] = ec.EllipticCurvePublicNumbers(
                    _int(entry["x"]), _int(entry["y"]), _CURVES[entry["crv"]]()).public_key()
        except (KeyError, ValueError, TokenValidationError):
            continue
    return keys


def _verify(algorithm: str, key: PublicKey, signature: bytes, signed: bytes) -> None:
    digest = _HASHES[algorithm[2:]]()
    try:
        if algorithm.startswith("RS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PKCS1v15(), digest)
        elif algorithm.startswith("PS") and isinstance(key, rsa.RSAPublicKey):
            key.verify(signature, signed, padding.PSS(padding.MGF1(digest), digest.digest_size), digest)
        elif algorithm.startswith("ES") and isinstance(key, ec.EllipticCurvePublicKey):
            half = len(signature) // 2  # JWS carries r || s; cryptography wants DER
            der = encode_dss_signature(int.from_bytes(signature[:half], "big"),
                                       int.from_bytes(signature[half:], "big"))
            key.verify(der, signed, ec.ECDSA(digest))
        else:
            raise TokenValidationError(f"the key does not fit the token's algorithm {algorithm}")
    except InvalidSignature:
        raise TokenValidationError("JWT signature verification failed") from None


class JwtValidator:
    """Kafka's broker-side JWT validation. `keys()` returns the JWKS keys by kid (the caller fetches and refreshes them)."""

    def __init__(self, keys: Callable[[], Mapping[str | None, PublicKey]], *,
                 expected_audience: Sequence[str] | None = None, expected_issuer: str | None = None,
                 sub_claim: str = "sub", scope_claim: str = "scope", clock_skew_seconds: int = 30,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self._keys = keys
        self.expected_audience = frozenset(expected_audience or ())
        self.expected_issuer = expected_issuer
        self.sub_claim = sub_claim
        self.scope_claim = scope_claim
        self.skew_ms = clock_skew_seconds * 1000
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))

    def validate(self, token: str) -> BearerToken:
        parts = token.split(".")
        if len(parts) != 3 or not parts[2]:
            raise TokenValidationError("a JWT is three dot-separated Base64URL values, the last the signature")
        header = _json_part(parts[0], "header")
        algorithm = header.get("alg")
        if algorithm not in ALLOWED_ALGORITHMS:
            raise TokenValidationError(f"the JWT's algorithm {algorithm!r} is not allowed")
        keys = self._keys()
        kid = header.get("kid")
        key = keys.get(kid) if kid is not None else (next(iter(keys.values())) if len(keys) == 1 else None)
        if key is None:
            raise TokenValidationError(f"no key in the JWKS for the JWT's kid {kid!r}")
        _verify(algorithm, key, b64url_decode(parts[2]), f"{parts[0]}.{parts[1]}".encode())
        claims: dict[str, Any] = _json_part(parts[1], "payload")
        if "iat" not in claims:
            raise TokenValidationError("Required claim missing: iat")
        expiration_ms = _check_times(claims, self._clock_ms(), self.skew_ms)
        if self.expected_audience:
            audience = claims.get("aud")
            audiences = {audience} if isinstance(audience, str) else set(audience or ())
            if not audiences & self.expected_audience:
                raise TokenValidationError(f"the JWT's audience {sorted(audiences)} is not one expected")
        if self.expected_issuer is not None and claims.get("iss") != self.expected_issuer:
            raise TokenValidationError(f"the JWT's issuer {claims.get('iss')!r} is not the expected one")
        return BearerToken(token, _principal(claims, self.sub_claim), expiration_ms,
                           _scope(claims, self.scope_claim))
