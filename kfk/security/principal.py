"""KafkaPrincipal: who sent a request, as authentication established it (Kafka's `User:<name>` principals).

Every request carries one: `User:ANONYMOUS` on a PLAINTEXT listener and on an SSL listener without a client
certificate, the SASL user name after SASL, the certificate's mapped DN after TLS client authentication. ACLs name
principals in the same `Type:name` form, so `parse` and `str` round-trip.
"""

from __future__ import annotations

from dataclasses import dataclass, field

USER_TYPE = "User"


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str
    #: Authenticated with a delegation token (SCRAM with tokenauth=true): such a client may not create, renew,
    #: expire or describe tokens (KIP-48). Not part of the principal's identity: ACLs match type and name only.
    token_authenticated: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @staticmethod
    def parse(text: str) -> KafkaPrincipal:
        """`User:alice` -> KafkaPrincipal("User", "alice"); ValueError for text without a type."""
        principal_type, separator, name = text.partition(":")
        if not separator or not principal_type:
            raise ValueError(f"expected a principal of the form Type:name, got {text!r}")
        return KafkaPrincipal(principal_type, name)


#: The principal of an unauthenticated connection (Kafka's KafkaPrincipal.ANONYMOUS).
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
