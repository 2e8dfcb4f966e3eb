"""TLS: SSLContexts built from Kafka's ssl.* settings, and the principal a client certificate stands for.

One builder serves the broker's listeners (server side), the broker's own connections to other brokers and the
client library (client side): each caller hands in a lookup of ssl.* keys, already resolved for its listener
(BrokerConfig.listener_override) or client (ClientConfig), so the listener.name.<l>. prefix is applied in one place.

Kafka's PEM support is what Python's ssl reads: `ssl.keystore.type=PEM` with `ssl.keystore.location` (a file holding
the private key and the certificate chain) or the same inline in `ssl.keystore.key` / `ssl.keystore.certificate.chain`,
`ssl.key.password` for an encrypted key; `ssl.truststore.type=PEM` with `ssl.truststore.location` or inline
`ssl.truststore.certificates`. JKS and PKCS12 stores (Java's formats) are refused with a message saying so.

The principal of a TLS connection is the client certificate's subject as Java's X500Principal.getName() prints it
(RFC 2253: most specific attribute first, `CN=alice,OU=eng,O=corp,C=DE`), mapped by ssl.principal.mapping.rules
(DEFAULT keeps it; `RULE:pattern/replacement/[LU]` rewrite it, first matching rule wins), User:ANONYMOUS when the
client sent no certificate.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kfk.errors import InvalidConfigurationError
from kfk.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal

#: The security protocols that run TLS.
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})

#: An ssl.* key's value, for the listener or client at hand (lists already split, None when unset).
Settings = Callable[[str], Any]

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PROTOCOL_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                      "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def server_context(settings: Settings, listener_name: str) -> ssl.SSLContext:
    """The SSLContext of an SSL or SASL_SSL listener: its key store, trust store (for client certificates) and
    ssl.client.auth. InvalidConfigurationError names what is missing or malformed."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _configure(context, settings)
    if not _load_key_store(context, settings):
        raise InvalidConfigurationError(f"listener {listener_name} uses TLS but has no key store: set "
                                        "ssl.keystore.location (PEM key and certificate chain) or ssl.keystore.key "
                                        "and ssl.keystore.certificate.chain")
    client_auth = str(settings("ssl.client.auth") or "none").strip().lower()
    if client_auth not in _CLIENT_AUTH:
        raise InvalidConfigurationError(f"Invalid value {client_auth} for configuration ssl.client.auth: "
                                        "expected none, requested or required")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if context.verify_mode != ssl.CERT_NONE:
        _load_trust_store(context, settings)
    return context


def client_context(settings: Settings) -> ssl.SSLContext:
    """The SSLContext of a client connection (kfk's client library, or a broker reaching another broker): the trust
    store the broker's certificate must chain to (the system's CAs when none is set, as the JVM's cacerts), the
    host name check of ssl.endpoint.identification.algorithm=https (Kafka's default; empty turns it off), and the
    key store when the client authenticates with a certificate."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _configure(context, settings)
    context.check_hostname = str(settings("ssl.endpoint.identification.algorithm") or "").strip().lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    _load_trust_store(context, settings)
    _load_key_store(context, settings)
    return context


def _configure(context: ssl.SSLContext, settings: Settings) -> None:
    """ssl.enabled.protocols (the lowest and highest enabled versions bound the handshake) and ssl.cipher.suites."""
    enabled = [name.strip() for name in settings("ssl.enabled.protocols") or [] if name.strip()]
    unknown = [name for name in enabled if name not in _PROTOCOL_VERSIONS]
    if unknown or not enabled:
        raise InvalidConfigurationError(f"Invalid value {','.join(enabled)} for configuration ssl.enabled.protocols: "
                                        f"expected some of {', '.join(_PROTOCOL_VERSIONS)}")
    versions = sorted(_PROTOCOL_VERSIONS[name] for name in enabled)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    suites = [name.strip() for name in settings("ssl.cipher.suites") or [] if name.strip()]
    if suites:
        # TLS 1.3's suites (TLS_AES_...) cannot be narrowed through Python's ssl; the TLS 1.2 ones can.
        names = [openssl_cipher_name(name) for name in suites if not name.startswith(("TLS_AES_", "TLS_CHACHA20_"))]
        if names:
            try:
                context.set_ciphers(":".join(names))
            except ssl.SSLError:
                raise InvalidConfigurationError(f"Invalid value {','.join(suites)} for configuration "
                                                "ssl.cipher.suites: no cipher suite OpenSSL knows") from None


def openssl_cipher_name(name: str) -> str:
    """A cipher suite named as Java and IANA name it (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) in OpenSSL's spelling
    (ECDHE-RSA-AES128-GCM-SHA256); a name already in OpenSSL's spelling is returned as it is."""
    if not name.startswith("TLS_") or "_WITH_" not in name:
        return name
    exchange, _, cipher = name[len("TLS_"):].partition("_WITH_")
    exchange = "" if exchange == "RSA" else exchange.replace("_", "-") + "-"
    cipher = re.sub(r"^AES_(\d+)_", r"AES\1_", cipher)
    cipher = cipher.replace("CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305").replace("_CBC_SHA", "-SHA")
    return exchange + cipher.replace("_", "-").replace("-SHA-", "-SHA")


def _store_type(settings: Settings, name: str) -> str:
    store_type = str(settings(name) or "PEM").strip().upper()
    if store_type != "PEM":
        raise InvalidConfigurationError(f"{name}={store_type} is not supported by kfk: use PEM stores "
                                        f"({name}=PEM), as Kafka's PEM support reads them")
    return store_type


def _load_key_store(context: ssl.SSLContext, settings: Settings) -> bool:
    """Load the private key and certificate chain, if configured; False if there is none."""
    location, key = settings("ssl.keystore.location"), settings("ssl.keystore.key")
    chain = settings("ssl.keystore.certificate.chain")
    if not location and not key:
        return False
    _store_type(settings, "ssl.keystore.type")
    password = settings("ssl.key.password") or None
    try:
        if location:
            context.load_cert_chain(location, password=password)
            return True
        if not chain:
            raise InvalidConfigurationError("ssl.keystore.key is set without ssl.keystore.certificate.chain")
        # Python's ssl loads key material from files only: a private file, removed at once.
        with tempfile.TemporaryDirectory(prefix="kfk-tls-") as directory:
            path = os.path.join(directory, "keystore.pem")
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as file:
                file.write(_pem(key) + "\n" + _pem(chain) + "\n")
            context.load_cert_chain(path, password=password)
        return True
    except (ssl.SSLError, OSError) as error:
        where = location or "ssl.keystore.key/ssl.keystore.certificate.chain"
        raise InvalidConfigurationError(f"cannot load the key store {where}: {_reason(error)}") from None


def _load_trust_store(context: ssl.SSLContext, settings: Settings) -> None:
    location, certificates = settings("ssl.truststore.location"), settings("ssl.truststore.certificates")
    if not location and not certificates:
        context.load_default_certs()
        return
    _store_type(settings, "ssl.truststore.type")
    try:
        if location:
            context.load_verify_locations(cafile=location)
        else:
            context.load_verify_locations(cadata=_pem(certificates))
    except (ssl.SSLError, OSError) as error:
        raise InvalidConfigurationError(f"cannot load the trust store {location or 'ssl.truststore.certificates'}: "
                                        f"{_reason(error)}") from None


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def _pem(text: str) -> str:
    """Inline PEM as a properties file may hold it (on one line, its lines joined by spaces, or with its line breaks)
    in the form OpenSSL reads: each block's base64 body on lines of 64 characters."""
    blocks = []
    for match in _PEM_BLOCK.finditer(text):
        label, body = match.group(1), "".join(match.group(2).split())
        lines = [body[index:index + 64] for index in range(0, len(body), 64)]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    return "\n".join(blocks) if blocks else text.strip()


def _reason(error: Exception) -> str:
    return getattr(error, "reason", None) or getattr(error, "strerror", None) or str(error)


# -- the principal of a certificate -----------------------------------------------------------------------------

#: Python's names of subject attributes -> the keywords of Java's RFC 2253 output.
_RFC2253_KEYWORDS = {"commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                     "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
                     "domainComponent": "DC", "userId": "UID"}
#: Attributes Java prints as OID=#hex (their DER value): the e-mail address, an IA5String.
_EMAIL_OID = "1.2.840.113549.1.9.1"


def distinguished_name(subject: tuple) -> str:
    """A certificate subject, as SSLObject.getpeercert() gives it (RDNs in certificate order), in RFC 2253 form as
    Java's X500Principal.getName() writes it: the last RDN first, multi-valued RDNs joined with +."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attribute, value in rdn:
            keyword = _RFC2253_KEYWORDS.get(attribute)
            if keyword is not None:
                parts.append(f"{keyword}={_escape(value)}")
            elif attribute == "emailAddress":
                encoded = value.encode("ascii", "replace")
                parts.append(f"{_EMAIL_OID}=#16{len(encoded):02x}{encoded.hex()}")
            else:
                parts.append(f"{attribute}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;])', r"\\\1", value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if not self.pattern.fullmatch(name):
            return None
        result = self.pattern.sub(self.replacement, name)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


class PrincipalMapper:
    """ssl.principal.mapping.rules: DEFAULT (the DN itself) and RULE:pattern/replacement/[LU] (a regular expression
    that must match the whole DN, its replacement with $1 for the first group, then lower or upper case)."""

    def __init__(self, rules: str | None) -> None:
        self.text = rules or "DEFAULT"
        self.rules: list[_Rule] = []
        position = 0
        text = self.text.strip()
        while position < len(text):
            match = _RULE.match(text, position)
            if match is None or match.end() == position:
                raise InvalidConfigurationError(f"Invalid value {self.text} for configuration "
                                                f"ssl.principal.mapping.rules: invalid rule at {text[position:]!r}")
            if match.group(1):
                self.rules.append(_Rule(None))
            else:
                replacement = re.sub(r"\$(\d)", r"\\g<\1>", match.group(3))
                try:
                    self.rules.append(_Rule(re.compile(match.group(2)), replacement, match.group(4)))
                except re.error as error:
                    raise InvalidConfigurationError(f"Invalid value {self.text} for configuration "
                                                    f"ssl.principal.mapping.rules: {error}") from None
            position = match.end()

    def name(self, distinguished: str) -> str:
        """The principal name of a DN; ValueError when no rule applies (Kafka then fails the authentication)."""
        for rule in self.rules:
            result = rule.apply(distinguished)
            if result is not None:
                return result
        raise ValueError(f"No rules apply to {distinguished}, rules {self.text}")


def peer_principal(ssl_object: ssl.SSLObject | None, mapper: PrincipalMapper) -> KafkaPrincipal:
    """The principal a TLS connection authenticated: the mapped DN of the client's certificate (verified against
    the trust store by the handshake), User:ANONYMOUS without one. ValueError when the mapping rules reject it."""
    certificate = ssl_object.getpeercert() if ssl_object is not None else None
    if not certificate or "subject" not in certificate:
        return ANONYMOUS
    return KafkaPrincipal(USER_TYPE, mapper.name(distinguished_name(certificate["subject"])))


@dataclass(frozen=True)
class ListenerTls:
    """What a TLS listener needs per connection: its server context and its principal mapping rules."""

    context: ssl.SSLContext
    mapper: PrincipalMapper

    @staticmethod
    def from_settings(settings: Settings, listener_name: str) -> ListenerTls:
        return ListenerTls(server_context(settings, listener_name),
                           PrincipalMapper(settings("ssl.principal.mapping.rules")))
