"""Forwarding with the client's principal (KIP-590) on a KRaft cluster with a separate controller: a broker-only node
wraps each admin request in an Envelope, and the controller authorizes the client it names, not the broker.

One controller-only node (101) and one broker-only node (1) serve the module, with StandardAuthorizer on both. The
clients (confluent-kafka's AdminClient) authenticate with SASL/PLAIN on the broker; the broker reaches the
controller on its PLAINTEXT CONTROLLER listener, where its principal is User:ANONYMOUS, which the controller's
super.users names (the broker's principal: what a broker needs to send envelopes). The controller has a second
controller listener, CTLS (SSL with client certificates), where a client certificate's subject is the principal: no
broker, so its envelopes are refused.
"""

from __future__ import annotations

import socket
import ssl
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kfk.client.admin import Admin
from kfk.client.structs import ClientQuotaAlteration, ClientQuotaFilterComponent, UserScramCredentialUpsertion
from kfk.common.client_quotas import ClientQuotaEntity
from kfk.errors import ErrorCode
from kfk.errors import KafkaError as KfkError
from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kfk.protocol.messages.envelope import EnvelopeRequest
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.security.principal import KafkaPrincipal
from kfk.security.principal_serde import serialize_principal
from kfk.testing.cluster import CLUSTER_OVERRIDES, KRAFT_OVERRIDES, KfkCluster, random_cluster_id
from kfk.testing.ports import free_port
from tests.cluster.helpers import wait_until
from tests.integration import wire
from tests.security.conftest import Certificates

pytestmark = pytest.mark.integration

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CONTROLLER_ID = 101
#: The host the host-restricted ACL names: only an envelope that says its client came from there passes.
GRANTED_HOST = "10.0.0.7"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates) -> Iterator[KfkCluster]:
    overrides = {
        **CLUSTER_OVERRIDES, **KRAFT_OVERRIDES,
        "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1", "default.replication.factor": "1",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CTLS:SSL",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin",
        "delegation.token.secret.key": "forwarded-token-secret",
    }
    directory = tmp_path_factory.mktemp("envelope-cluster")
    cluster = KfkCluster(None, directory, overrides, listener_name="SASL_PLAINTEXT")
    cluster.cluster_id = random_cluster_id()
    cluster.voters = {CONTROLLER_ID: free_port()}
    controller = cluster.add_controller(CONTROLLER_ID, {
        "controller.listener.names": "CONTROLLER,CTLS", "super.users": "User:admin;User:ANONYMOUS",
        **certificates.broker_overrides("required", prefix="listener.name.ctls.")})
    controller.extra_listeners = ["CTLS://127.0.0.1:0"]
    cluster.add_broker(1)
    try:
        cluster.start()
        yield cluster
    finally:
        _ADMINS.clear()
        cluster.shutdown()


_ADMINS: dict[str, AdminClient] = {}


def admin(cluster: KfkCluster, user: str = "admin") -> AdminClient:
    """One AdminClient per user on the broker-only node (a client must outlive the futures of its calls)."""
    if user not in _ADMINS:
        _ADMINS[user] = AdminClient({
            "bootstrap.servers": cluster.broker(1).bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user]})
    return _ADMINS[user]


def kfk_admin(cluster: KfkCluster, user: str) -> Admin:
    return Admin({"bootstrap.servers": cluster.broker(1).bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user]})


def error_code(future) -> int:
    """The Kafka error code a future of confluent-kafka's AdminClient failed with (NONE: it succeeded)."""
    try:
        future.result(30)
    except KafkaException as exception:
        return exception.args[0].code()
    return KafkaError.NO_ERROR


def grant(cluster: KfkCluster, user: str, operation: AclOperation, name: str,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL, host: str = "*") -> None:
    """An ALLOW ACL on a topic, created by the super user through the broker (a forwarded CreateAcls)."""
    binding = AclBinding(ResourceType.TOPIC, name, pattern, f"User:{user}", host, operation,
                         AclPermissionType.ALLOW)
    assert error_code(admin(cluster).create_acls([binding])[binding]) == KafkaError.NO_ERROR


def topics(cluster: KfkCluster) -> set[str]:
    return set(admin(cluster).list_topics(timeout=10).topics)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:6]}"


def test_alice_creates_topics_under_her_prefix_and_no_others(cluster: KfkCluster) -> None:
    grant(cluster, "alice", AclOperation.CREATE, "a-", ResourcePatternType.PREFIXED)
    mine, other = unique("a-"), unique("b-")
    futures = admin(cluster, "alice").create_topics([NewTopic(mine, 1, 1), NewTopic(other, 1, 1)])
    assert error_code(futures[mine]) == KafkaError.NO_ERROR
    assert error_code(futures[other]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    wait_until(lambda: mine in topics(cluster), 10, what=f"{mine} on the broker")
    assert other not in topics(cluster)


def test_incremental_alter_configs_needs_alter_configs_of_the_forwarded_principal(cluster: KfkCluster) -> None:
    name = unique("cfg-")
    assert error_code(admin(cluster).create_topics([NewTopic(name, 1, 1)])[name]) == KafkaError.NO_ERROR
    grant(cluster, "alice", AclOperation.ALTER_CONFIGS, name)

    def alter(user: str, retention_ms: str) -> int:
        resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
            ConfigEntry("retention.ms", retention_ms, incremental_operation=AlterConfigOpType.SET)])
        return error_code(admin(cluster, user).incremental_alter_configs([resource])[resource])

    # bob has no ACL: the controller refused him, not the broker that forwarded his request (a super user's
    # principal would have passed).
    assert alter("bob", "1000") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert alter("alice", "2000") == KafkaError.NO_ERROR

    def retention_ms() -> str:
        described = admin(cluster).describe_configs([ConfigResource(ResourceType.TOPIC, name)])
        return next(iter(described.values())).result(30)["retention.ms"].value

    wait_until(lambda: retention_ms() == "2000", 10, what="alice's retention.ms on the broker")


def test_create_acls_by_a_super_user_is_forwarded_and_takes_effect(cluster: KfkCluster) -> None:
    name = unique("c-")
    assert error_code(admin(cluster, "bob").create_topics([NewTopic(name, 1, 1)])[name]) \
        == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(cluster, "bob", AclOperation.CREATE, name)
    acl_filter = AclBindingFilter(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    # At once: the controller that authorizes bob's forwarded request has committed the ACL.
    assert error_code(admin(cluster, "bob").create_topics([NewTopic(name, 1, 1)])[name]) == KafkaError.NO_ERROR
    wait_until(lambda: name in topics(cluster), 10, what=f"{name} on the broker")
    # DescribeAcls is the broker's own answer, from its metadata image once the ACL record reached it.
    wait_until(lambda: [(acl.principal, acl.operation) for acl in admin(cluster).describe_acls(acl_filter).result(30)]
               == [("User:bob", AclOperation.CREATE)], 10, what="the ACL in the broker's image")


def test_create_acls_by_a_user_without_alter_on_the_cluster_is_refused(cluster: KfkCluster) -> None:
    name = unique("d-")
    binding = AclBinding(ResourceType.TOPIC, name, ResourcePatternType.LITERAL, "User:alice", "*",
                         AclOperation.ALL, AclPermissionType.ALLOW)
    assert error_code(admin(cluster, "alice").create_acls([binding])[binding]) \
        == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    acl_filter = AclBindingFilter(ResourceType.TOPIC, name, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert admin(cluster).describe_acls(acl_filter).result(30) == []


def test_quota_and_scram_changes_through_a_broker_only_node_are_authorized_as_their_sender(
        cluster: KfkCluster) -> None:
    """AlterClientQuotas (ALTER_CONFIGS on the cluster) and AlterUserScramCredentials (ALTER on the cluster) reach
    the controller from a broker-only node too, answered for the client that sent them."""
    entity = ClientQuotaEntity.of([("user", unique("quota-"))])
    quota = ClientQuotaAlteration(entity, {"producer_byte_rate": 1024.0})
    scram = UserScramCredentialUpsertion(unique("scram-"), "SCRAM-SHA-256", 4096, "secret")
    with kfk_admin(cluster, "alice") as alice:
        assert alice.alter_client_quotas([quota])[entity].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert alice.alter_user_scram_credentials([scram])[scram.user].error_code \
            == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with kfk_admin(cluster, "admin") as admin_client:
        assert admin_client.alter_client_quotas([quota]) == {entity: None}
        assert admin_client.alter_user_scram_credentials([scram]) == {scram.user: None}
        wait_until(lambda: admin_client.describe_client_quotas([ClientQuotaFilterComponent.of_entity(
            "user", entity.parts[0][1])]) == {entity: {"producer_byte_rate": 1024.0}}, 10, what="the quota on the broker")


def test_voter_changes_through_a_broker_only_node_need_alter_on_the_cluster(cluster: KfkCluster) -> None:
    """AddRaftVoter and RemoveRaftVoter (KIP-853) are forwarded too and authorized for their sender: alice is refused,
    the super user reaches the quorum's leader, which refuses to change this static quorum's voters."""
    voter = (CONTROLLER_ID, uuid.UUID(int=0))
    endpoints = [("CONTROLLER", "127.0.0.1", cluster.voters[CONTROLLER_ID])]
    with kfk_admin(cluster, "alice") as alice:
        for change in (lambda: alice.remove_raft_voter(*voter), lambda: alice.add_raft_voter(*voter, endpoints)):
            with pytest.raises(KfkError) as refused:
                change()
            assert refused.value.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    with kfk_admin(cluster, "admin") as admin_client:
        with pytest.raises(KfkError) as refused:
            admin_client.remove_raft_voter(*voter)
        assert refused.value.error_code == ErrorCode.UNSUPPORTED_VERSION


# -- the Envelope on the wire, to the controller ------------------------------------------------------------------


def envelope(inner: CreateTopicsRequest | MetadataRequest, version: int, principal: bytes, host: str,
             correlation_id: int = 4711) -> EnvelopeRequest:
    header = RequestHeader(request_api_key=inner.API_KEY, request_api_version=version,
                           correlation_id=correlation_id, client_id="envelope-test")
    return EnvelopeRequest(request_data=encode_request(header, inner)[4:], request_principal=principal,
                           client_host_address=socket.inet_aton(host))


def create_topic_request(name: str) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1)], timeout_ms=30_000)


ALICE = serialize_principal(KafkaPrincipal("User", "alice"))
ADMIN = serialize_principal(KafkaPrincipal("User", "admin"))


def controller_address(cluster: KfkCluster) -> str:
    return f"127.0.0.1:{cluster.voters[CONTROLLER_ID]}"


def test_the_controller_authorizes_the_principal_and_host_the_envelope_names(cluster: KfkCluster) -> None:
    prefix = unique("h") + "-"
    grant(cluster, "alice", AclOperation.CREATE, prefix, ResourcePatternType.PREFIXED, host=GRANTED_HOST)
    allowed, refused = prefix + "1", prefix + "2"
    with wire.connect(controller_address(cluster)) as sock:  # as the broker (User:ANONYMOUS here, a super user)
        answer = wire.request(sock, envelope(create_topic_request(allowed), 7, ALICE, GRANTED_HOST), 0)
        assert answer.error_code == ErrorCode.NONE
        correlation_id, inner = decode_response(answer.response_data, CreateTopicsRequest.API_KEY, 7)
        assert correlation_id == 4711  # the client's, for the broker to answer it with
        assert [(topic.name, topic.error_code) for topic in inner.topics] == [(allowed, ErrorCode.NONE)]
        answer = wire.request(sock, envelope(create_topic_request(refused), 7, ALICE, "10.0.0.8"), 0)
        _, inner = decode_response(answer.response_data, CreateTopicsRequest.API_KEY, 7)
        assert isinstance(inner, CreateTopicsResponse)
        assert [topic.error_code for topic in inner.topics] == [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    wait_until(lambda: allowed in topics(cluster), 10, what=f"{allowed} on the broker")
    assert refused not in topics(cluster)


def test_the_controller_answers_envelope_errors(cluster: KfkCluster) -> None:
    with wire.connect(controller_address(cluster)) as sock:
        garbled = wire.request(sock, envelope(create_topic_request(unique("e-")), 7, b"\x00\x00\xff", "10.0.0.1"), 0)
        assert garbled.error_code == ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE
        not_forwardable = wire.request(sock, envelope(MetadataRequest(topics=None), 12, ADMIN, "10.0.0.1"), 0)
        assert not_forwardable.error_code == ErrorCode.INVALID_REQUEST
        control = wire.request(sock, envelope(create_topic_request(unique("e-")), 7, ADMIN, "10.0.0.1"), 0)
        assert control.error_code == ErrorCode.NONE  # the same envelope with a principal that parses passes


def test_an_envelope_from_a_principal_that_is_no_broker_is_refused(cluster: KfkCluster,
                                                                   certificates: Certificates) -> None:
    """CTLS authenticates the client certificate (User:CN=alice,...): no CLUSTER_ACTION, so even an envelope that
    names the super user does not pass."""
    name = unique("x-")
    context = ssl.create_default_context(cafile=str(certificates.ca))
    context.load_cert_chain(str(certificates.client.pem))
    port = cluster.controllers[CONTROLLER_ID].ports["CTLS"]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as sock:
        answer = wire.request(sock, envelope(create_topic_request(name), 7, ADMIN, "10.0.0.1"), 0)
    assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert answer.response_data is None
    assert name not in topics(cluster)


def test_delegation_tokens_through_a_broker_only_node(cluster: KfkCluster) -> None:
    """Create and Renew go to the controller in an Envelope: the token's requester is the client, a token for
    someone else needs CreateTokens on that user, and a client logged in with a token (the flag travels in the
    envelope's principal) may not create another."""
    import base64

    from kfk.errors import DelegationTokenAuthorizationError, UnsupportedByAuthenticationError

    with kfk_admin(cluster, "alice") as alice:
        token = alice.create_delegation_token()
        assert token.token_requester == token.owner == KafkaPrincipal("User", "alice")
        with pytest.raises(DelegationTokenAuthorizationError):
            alice.create_delegation_token(owner=KafkaPrincipal("User", "bob"))
        assert alice.renew_delegation_token(token.hmac, renew_time_period_ms=60_000) > token.issue_timestamp_ms
        wait_until(lambda: [t.token_id for t in alice.describe_delegation_token([token.owner])] == [token.token_id],
                   10, what="the token in the broker's image")
    by_token = Admin({
        "bootstrap.servers": cluster.broker(1).bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            f'username="{token.token_id}" password="{base64.b64encode(token.hmac).decode()}" '
                            f'tokenauth="true";'})
    with by_token, pytest.raises(UnsupportedByAuthenticationError):
        by_token.create_delegation_token()
