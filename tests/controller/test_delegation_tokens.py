"""Delegation tokens through the controller over a real embedded metadata log, on a manual clock: Kafka's lifetime
arithmetic for create, renew and expire, its errors in its order, the sweep of expired tokens, and tokens kept across
a reopen (log replay) and in snapshots."""

from __future__ import annotations

import base64

from kfk.backends.embedded.snapshots.image_records import image_records
from kfk.controller.delegation_token_control import remove_expired_tokens
from kfk.errors import ErrorCode
from kfk.metadata.delegation_tokens import token_hmac
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from kfk.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from kfk.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from kfk.security.principal import KafkaPrincipal

SECRET = "the-secret"
HOUR, DAY = 3_600_000, 86_400_000
ALICE, BOB, CAROL = (KafkaPrincipal("User", name) for name in ("alice", "bob", "carol"))
Renewer = CreateDelegationTokenRequest.CreatableRenewers


def tokens_cluster(make_cluster, **overrides: str):
    return make_cluster({"delegation.token.secret.key": SECRET, "delegation.token.max.lifetime.ms": str(7 * DAY),
                         "delegation.token.expiry.time.ms": str(DAY), **overrides})


def create(cluster, requester=ALICE, max_lifetime_ms: int = -1, renewers=(BOB,), owner: KafkaPrincipal | None = None):
    return cluster.run(cluster.controller.create_delegation_token(requester, CreateDelegationTokenRequest(
        owner_principal_type=owner and owner.principal_type, owner_principal_name=owner and owner.name,
        renewers=[Renewer(principal_type=r.principal_type, principal_name=r.name) for r in renewers],
        max_lifetime_ms=max_lifetime_ms)))


def renew(cluster, hmac: bytes, period_ms: int, principal=ALICE):
    return cluster.run(cluster.controller.renew_delegation_token(
        principal, RenewDelegationTokenRequest(hmac=hmac, renew_period_ms=period_ms)))


def expire(cluster, hmac: bytes, period_ms: int, principal=ALICE):
    return cluster.run(cluster.controller.expire_delegation_token(
        principal, ExpireDelegationTokenRequest(hmac=hmac, expiry_time_period_ms=period_ms)))


def test_create_renew_expire_times(make_cluster, clock) -> None:
    cluster = tokens_cluster(make_cluster)
    now = clock()
    created = create(cluster)
    assert created.error_code == ErrorCode.NONE
    assert (created.issue_timestamp_ms, created.expiry_timestamp_ms, created.max_timestamp_ms) \
        == (now, now + DAY, now + 7 * DAY)
    assert bytes(created.hmac) == token_hmac(SECRET, created.token_id)
    assert len(created.token_id) == 22 and base64.urlsafe_b64decode(created.token_id + "==")  # Kafka's Uuid text
    token = cluster.image.delegation_tokens[created.token_id]
    assert (token.owner, token.requester, token.renewers) == (ALICE, ALICE, (BOB,))
    # A requested lifetime shorter than the broker's wins, and caps the first expiry.
    short = create(cluster, max_lifetime_ms=HOUR)
    assert (short.expiry_timestamp_ms, short.max_timestamp_ms) == (now + HOUR, now + HOUR)
    assert create(cluster, max_lifetime_ms=30 * DAY).max_timestamp_ms == now + 7 * DAY
    clock.advance(HOUR)
    # Renewal: the period (capped at delegation.token.expiry.time.ms) from now, never past the maximum; a renewer
    # may renew, a stranger may not.
    assert renew(cluster, created.hmac, 10_000, BOB).expiry_timestamp_ms == clock() + 10_000
    assert renew(cluster, created.hmac, -1).expiry_timestamp_ms == clock() + DAY
    assert renew(cluster, created.hmac, 30 * DAY).expiry_timestamp_ms == clock() + DAY
    assert renew(cluster, created.hmac, 1, CAROL).error_code == ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    assert renew(cluster, b"not-a-token", 1).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    assert cluster.image.delegation_tokens[created.token_id].expiry_timestamp_ms == clock() + DAY
    # Expiry in the future moves the expiry; -1 removes the token.
    assert expire(cluster, created.hmac, 5_000).expiry_timestamp_ms == clock() + 5_000
    assert expire(cluster, created.hmac, -1).expiry_timestamp_ms == -1
    assert created.token_id not in cluster.image.delegation_tokens
    assert renew(cluster, created.hmac, 1).error_code == ErrorCode.DELEGATION_TOKEN_NOT_FOUND


def test_refusals(make_cluster, clock) -> None:
    disabled = make_cluster()
    assert create(disabled).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    assert renew(disabled, b"x", 1).error_code == ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    cluster = tokens_cluster(make_cluster)
    group = create(cluster, renewers=(KafkaPrincipal("Group", "ops"),))
    assert group.error_code == ErrorCode.INVALID_PRINCIPAL_TYPE
    assert not cluster.image.delegation_tokens
    on_behalf = create(cluster, owner=CAROL)  # the broker checked CreateTokens on User:carol
    assert (on_behalf.principal_name, on_behalf.token_requester_principal_name) == ("carol", "alice")
    token = cluster.image.delegation_tokens[on_behalf.token_id]
    assert (token.owner, token.requester) == (CAROL, ALICE)
    # Expired: refused before the owner check (Kafka's order), and swept by the controller.
    clock.advance(DAY + 1)
    assert renew(cluster, on_behalf.hmac, 1, BOB).error_code == ErrorCode.DELEGATION_TOKEN_EXPIRED
    assert remove_expired_tokens(cluster.image, clock()).response == 1
    assert cluster.run(cluster.controller._write(lambda image: remove_expired_tokens(image, clock()))) == 1
    assert not cluster.image.delegation_tokens


def test_tokens_survive_reopen_and_snapshots(make_cluster) -> None:
    cluster = tokens_cluster(make_cluster)
    created = create(cluster)
    renewed = renew(cluster, created.hmac, HOUR)
    cluster.reopen()  # the controller and cache replay the metadata log
    token = cluster.image.delegation_tokens[created.token_id]
    assert token.expiry_timestamp_ms == renewed.expiry_timestamp_ms
    assert token.renewers == (BOB,)
    snapshot = MetadataImage().apply(image_records(cluster.image), 0)
    assert snapshot.delegation_tokens == cluster.image.delegation_tokens
