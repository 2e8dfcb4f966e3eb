"""What kfk does with every config key it accepts: which code reads it, or why it does not and what happens then.

kfk accepts Kafka's configuration surface (kfk.config, kfk.client.config) so that a Kafka user's server.properties,
topic configs and client properties work unchanged. A key that kfk accepts, describes as Kafka does and then does
not act on is a placebo: the user believes a limit, a timeout or a plug-in is in force when nothing is. So every
accepted key is classified here, once:

(a) it GOVERNS behaviour: the modules that read it are named (`BROKER_KEY_READERS`, `TOPIC_KEY_READERS`,
    `CLIENT_KEY_READERS`), and tests/test_config_audit.py checks that each named module reads it;
(b) it has NO MEANING IN KFK: it configures the JVM (a Java class, a security provider, a key manager algorithm) or a
    part of Kafka's implementation that kfk's design has not (thread pools, purgatory purge intervals, buffers of
    the JVM's I/O): accepted at its default; another value is refused when it names something kfk cannot load or
    do (a Java plug-in whose absence would silently change authentication, authorization or policies), and warned
    about once at start-up when kfk's behaviour is the one the user wants anyway (a thread count);
(c) it belongs to a FEATURE KFK DOES NOT HAVE yet (tiered storage, parts of share groups, Kerberos...): accepted at
    its default, refused at start-up with any other value, with one line naming the key and the feature.

The test enumerates every key of the config definitions and fails on a key that is in none of these tables, so a
new key cannot be added without saying what reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

__all__ = [
    "BROKER_KEY_READERS",
    "BROKER_UNSUPPORTED",
    "CLIENT_KEY_READERS",
    "CLIENT_UNSUPPORTED",
    "TOPIC_KEY_READERS",
    "TOPIC_UNSUPPORTED",
    "Unsupported",
]


@dataclasses.dataclass(frozen=True)
class Unsupported:
    """A key kfk accepts but does not act on (class b or c), and what a value other than its default does."""

    #: Why kfk does not act on it: the feature kfk lacks (class c) or what kfk does instead (class b).
    why: str
    #: True: a value other than the default stops the start (or the client) with one line; False: one warning line.
    refuse: bool
    #: Class (c): a feature kfk does not have; else class (b): no meaning in kfk.
    missing_feature: bool
    #: Values besides the default that ask for what kfk does anyway (Kafka's own class for what kfk does natively).
    also_accepted: tuple[Any, ...] = ()

    def message(self, name: str, value: Any) -> str:
        """The one line that names the key, its value and why kfk does not act on it."""
        if isinstance(value, bool):
            shown = "true" if value else "false"
        else:
            shown = ",".join(value) if isinstance(value, list) else value
        if not self.refuse:
            return f"{name}={shown} has no effect in kfk: {self.why}"
        reason = f"feature: {self.why}" if self.missing_feature else self.why
        return f"{name}={shown} is not supported by kfk ({reason}); remove it or leave it at its default"

    def accepts(self, value: Any, default: Any) -> bool:
        """Whether `value` (parsed) is the default or means the same in kfk; an empty value stands for an unset
        one (a `key=` line in a properties file)."""
        if value == default or value in self.also_accepted:
            return True
        return default is None and value in ("", [])


def _feature(feature: str, names: Iterable[str], *also_accepted: Any) -> dict[str, Unsupported]:
    return {name: Unsupported(feature, True, True, also_accepted) for name in names}


def _feature_ignored(why: str, names: Iterable[str]) -> dict[str, Unsupported]:
    return {name: Unsupported(why, False, True) for name in names}


def _refused(why: str, names: Iterable[str], *also_accepted: Any) -> dict[str, Unsupported]:
    return {name: Unsupported(why, True, False, also_accepted) for name in names}


def _ignored(why: str, names: Iterable[str]) -> dict[str, Unsupported]:
    return {name: Unsupported(why, False, False) for name in names}


# ---------------------------------------------------------------------------------------------------------------
# (a) Broker keys that govern behaviour, with the modules that read them. An entry is a module, read by the key's
# attribute (`config.log_segment_bytes`) or by its name (`values["log.roll.ms"]`, `settings("ssl.client.auth")`);
# "module:accessor" names the attribute when the module reads the key through one kfk.config derives from it
# (`log_dir_list` from log.dir and log.dirs). kfk.config itself is a reader where BrokerConfig derives a value
# (the broker's defaults of topic configs in topic_defaults(), the inter-broker listener, the KRaft role checks).

_SERVER = "kfk.server.broker"
_GROUP = "kfk.coordinator.group.config"
_SHARE_GROUP = "kfk.coordinator.group.share_group"  # checks the bounds; the broker hands the values on
_TXN = "kfk.coordinator.transaction.config"
_SHARE_COORDINATOR = "kfk.coordinator.share.coordinator"
_FETCHER = "kfk.replication.replica_fetcher"
_CONTROLLER = "kfk.controller.quorum_controller"
_RAFT = "kfk.backends.embedded.raft.config"
_TLS = "kfk.security.tls"
_SASL = "kfk.security.sasl.settings"
_SASL_SERVER = "kfk.server.sasl_config"
_QUOTAS = "kfk.server.connection_quotas"
_CLEANER = "kfk.storage.cleaner_threads"
_TOPIC_DEFAULTS = "kfk.config"  # BrokerConfig.topic_defaults(): a broker key that is the default of a topic key

BROKER_KEY_READERS: dict[str, tuple[str, ...]] = {
    # roles, identity, quorum
    "node.id": (_SERVER,),
    "broker.id": ("kfk.config",),
    "process.roles": (_SERVER, "kfk.config"),
    "broker.rack": (_SERVER,),
    "controller.listener.names": (_SERVER, "kfk.config"),
    "controller.quorum.voters": ("kfk.config", f"{_SERVER}:quorum_voter_addresses"),
    "controller.quorum.bootstrap.servers": (_SERVER, "kfk.config"),
    "controller.quorum.election.backoff.max.ms": (_RAFT,),
    "controller.quorum.election.timeout.ms": (_RAFT,),
    "controller.quorum.fetch.timeout.ms": (_RAFT,),
    "controller.quorum.request.timeout.ms": (_RAFT, _SERVER),
    "controller.quorum.retry.backoff.ms": (_RAFT,),
    "controller.socket.timeout.ms": (_SERVER,),
    "broker.heartbeat.interval.ms": (_SERVER,),
    "broker.session.timeout.ms": (_SERVER, _CONTROLLER),
    "metadata.log.segment.bytes": (_SERVER, "kfk.config"),
    "metadata.log.segment.min.bytes": ("kfk.config",),
    "metadata.log.max.record.bytes.between.snapshots": (_SERVER,),
    "metadata.log.max.snapshot.interval.ms": (_SERVER,),
    "zookeeper.connect": (_SERVER,),
    "zookeeper.session.timeout.ms": (_SERVER,),
    "zookeeper.connection.timeout.ms": (_SERVER,),
    # network, listeners, connections
    "listeners": (_SERVER,),
    "advertised.listeners": (_SERVER,),
    "listener.security.protocol.map": (_SERVER, "kfk.config"),
    "inter.broker.listener.name": ("kfk.config", f"{_SERVER}:inter_broker_listener"),
    "security.inter.broker.protocol": ("kfk.config", f"{_SERVER}:inter_broker_listener"),
    "socket.request.max.bytes": (_SERVER,),
    "socket.request.receive.timeout.ms": (_SERVER,),
    "connections.max.idle.ms": (_SERVER,),
    "queued.max.request.bytes": (_SERVER,),
    "num.network.threads": (_SERVER,),
    "num.io.threads": (_SERVER,),
    "socket.send.buffer.bytes": (_SERVER,),
    "add.partitions.to.txn.retry.backoff.ms": (_SERVER,),
    "add.partitions.to.txn.retry.backoff.max.ms": (_SERVER,),
    "max.connections": (_QUOTAS,),
    "max.connections.per.ip": (_QUOTAS,),
    "max.connections.per.ip.overrides": (_SERVER,),
    "max.connection.creation.rate": (_QUOTAS,),
    "quota.window.num": (_SERVER,),
    "quota.window.size.seconds": (_SERVER,),
    "metrics.port": ("kfk.server.metrics",),
    "metrics.host": ("kfk.server.metrics",),
    "max.request.partition.size.limit": (_SERVER,),
    "max.incremental.fetch.session.cache.slots": (_SERVER,),
    # topics and logs
    "log.dirs": ("kfk.config", f"{_SERVER}:log_dir_list"),
    "log.dir": ("kfk.config", f"{_SERVER}:log_dir_list"),
    "num.partitions": ("kfk.controller.auto_topic_creation", "kfk.controller.replication_control"),
    "default.replication.factor": ("kfk.controller.auto_topic_creation", "kfk.controller.replication_control"),
    "auto.create.topics.enable": (_SERVER,),
    "delete.topic.enable": (_CONTROLLER,),
    "log.retention.check.interval.ms": (_SERVER,),
    "log.flush.offset.checkpoint.interval.ms": (_SERVER,),
    "producer.id.expiration.ms": (_SERVER,),
    "log.cleaner.enable": (_CLEANER,),
    "log.cleaner.threads": (_CLEANER,),
    "log.cleaner.backoff.ms": (_CLEANER,),
    "log.cleaner.io.max.bytes.per.second": (_CLEANER,),
    **{name: (_TOPIC_DEFAULTS,) for name in (
        "log.segment.bytes", "log.roll.ms", "log.roll.hours", "log.roll.jitter.ms", "log.roll.jitter.hours",
        "log.retention.ms", "log.retention.minutes", "log.retention.hours", "log.retention.bytes",
        "log.index.size.max.bytes", "log.index.interval.bytes", "log.flush.interval.messages",
        "log.flush.interval.ms", "log.segment.delete.delay.ms", "log.cleanup.policy",
        "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
        "log.cleaner.min.cleanable.ratio", "log.preallocate", "log.message.timestamp.type",
        "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms", "message.max.bytes",
        "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
        "min.insync.replicas", "unclean.leader.election.enable")},
    # replication and leadership
    "replica.lag.time.max.ms": ("kfk.replication.replica_manager",),
    "replica.fetch.max.bytes": (_FETCHER,),
    "replica.fetch.response.max.bytes": (_FETCHER,),
    "fetch.max.bytes": (_SERVER,),
    "sasl.server.max.receive.size": (_SASL_SERVER,),
    # delegation tokens (KIP-48): the secret key turns them on (and is refused in ZooKeeper mode)
    "delegation.token.secret.key": (_SERVER, _CONTROLLER, "kfk.config"),
    "delegation.token.max.lifetime.ms": (_CONTROLLER,),
    "delegation.token.expiry.time.ms": (_CONTROLLER,),
    "delegation.token.expiry.check.interval.ms": (_CONTROLLER,),
    "replica.fetch.wait.max.ms": (_FETCHER,),
    "replica.fetch.min.bytes": (_FETCHER,),
    "replica.fetch.backoff.ms": (_FETCHER,),
    "num.replica.fetchers": (_FETCHER,),
    "auto.leader.rebalance.enable": (_CONTROLLER,),
    "leader.imbalance.check.interval.seconds": (_CONTROLLER,),
    "leader.imbalance.per.broker.percentage": (_CONTROLLER,),
    "controlled.shutdown.enable": (_SERVER,),
    "follower.replication.throttled.rate": ("kfk.replication.replica_manager",),
    # the group coordinator
    "offsets.topic.num.partitions": (_GROUP,),
    "offsets.topic.replication.factor": (_GROUP,),
    "offsets.topic.segment.bytes": (_GROUP,),
    "offsets.retention.minutes": (_GROUP,),
    "offsets.retention.check.interval.ms": (_GROUP,),
    "offset.metadata.max.bytes": (_GROUP,),
    "offsets.commit.timeout.ms": (_GROUP,),
    "group.initial.rebalance.delay.ms": (_GROUP,),
    "group.min.session.timeout.ms": (_GROUP,),
    "group.max.session.timeout.ms": (_GROUP,),
    "group.max.size": (_GROUP,),
    "group.coordinator.rebalance.protocols": (_GROUP,),
    "group.consumer.assignors": (_GROUP,),
    "group.consumer.session.timeout.ms": (_GROUP,),
    "group.consumer.min.session.timeout.ms": (_GROUP,),
    "group.consumer.max.session.timeout.ms": (_GROUP,),
    "group.consumer.heartbeat.interval.ms": (_GROUP,),
    "group.consumer.min.heartbeat.interval.ms": (_GROUP,),
    "group.consumer.max.heartbeat.interval.ms": (_GROUP,),
    "group.consumer.max.size": (_GROUP,),
    "group.consumer.migration.policy": (_GROUP,),
    # share groups (KIP-932)
    **{key: (_SHARE_GROUP, _SERVER) for key in (
        "group.share.delivery.count.limit", "group.share.record.lock.duration.ms",
        "group.share.partition.max.record.locks", "group.share.max.size", "group.share.session.timeout.ms",
        "group.share.heartbeat.interval.ms", "group.share.max.share.sessions")},
    **{key: (_SHARE_GROUP,) for key in (
        "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
        "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
        "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms")},
    # transactions
    "transaction.state.log.num.partitions": (_TXN,),
    "transaction.state.log.replication.factor": (_TXN,),
    "transaction.state.log.min.isr": (_TXN,),
    # the share coordinator (KIP-932)
    "share.coordinator.state.topic.num.partitions": (_SHARE_COORDINATOR, "kfk.controller.auto_topic_creation"),
    **{key: (_SHARE_COORDINATOR,) for key in (
        "share.coordinator.snapshot.update.records.per.snapshot", "share.coordinator.write.timeout.ms",
        "share.coordinator.state.topic.prune.interval.ms", "share.coordinator.cold.partition.snapshot.interval.ms")},
    **{key: ("kfk.controller.auto_topic_creation",) for key in (
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr", "share.coordinator.state.topic.segment.bytes")},
    "transaction.state.log.segment.bytes": (_TXN,),
    "transaction.max.timeout.ms": (_TXN,),
    "transactional.id.expiration.ms": (_TXN,),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": (_TXN,),
    "transaction.remove.expired.transaction.cleanup.interval.ms": (_TXN,),
    "transaction.partition.verification.enable": (_SERVER,),
    # security
    "authorizer.class.name": ("kfk.server.authorization",),
    "super.users": ("kfk.config", "kfk.server.authorization"),
    "allow.everyone.if.no.acl.found": ("kfk.config", "kfk.server.authorization"),
    "sasl.enabled.mechanisms": (_SASL,),
    "sasl.jaas.config": (_SASL,),
    "sasl.mechanism.inter.broker.protocol": (_SASL,),
    "sasl.mechanism.controller.protocol": (_SASL,),
    "sasl.oauthbearer.clock.skew.seconds": (_SASL_SERVER,),
    "sasl.oauthbearer.expected.audience": (_SASL_SERVER,),
    "sasl.oauthbearer.expected.issuer": (_SASL_SERVER,),
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": (_SASL_SERVER,),
    "sasl.oauthbearer.jwks.endpoint.url": (_SASL_SERVER,),
    "sasl.oauthbearer.scope.claim.name": (_SASL_SERVER,),
    "sasl.oauthbearer.sub.claim.name": (_SASL_SERVER,),
    "connections.max.reauth.ms": (_SASL_SERVER,),
    "connection.failed.authentication.delay.ms": (_SASL_SERVER,),
    **{name: (_TLS,) for name in (
        "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm",
        "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
        "ssl.keystore.type", "ssl.principal.mapping.rules", "ssl.truststore.certificates", "ssl.truststore.location",
        "ssl.truststore.type")},
    # kfk's own: where the broker's log goes
    "log.file": ("kfk.commands.server",),
    "log.file.max.bytes": ("kfk.commands.server",),
    "log.file.backups": ("kfk.commands.server",),
}

# ---------------------------------------------------------------------------------------------------------------
# (b) and (c): broker keys kfk accepts but does not act on.

#: Kafka's own class for JWT validation against a JWKS (KIP-768): kfk validates against
#: sasl.oauthbearer.jwks.endpoint.url natively, so naming it asks for what kfk does.
OAUTHBEARER_VALIDATOR_CALLBACK_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
)
_TIERED_STORAGE = "tiered storage (KIP-405)"
_NO_DECOMPRESSED_BOUND = ("kfk's broker does not bound the decompressed size of a record (Kafka 4.4's guard against "
                          "compression bombs)")
_SHARE_GROUPS = "share groups (KIP-932)"
_JAVA_PLUGIN = "a Java plug-in class, which kfk cannot load"

_SSL_IGNORED = _ignored(
    "the JVM's TLS provider settings; kfk's TLS is OpenSSL's, configured by ssl.enabled.protocols, "
    "ssl.cipher.suites and PEM key and trust stores (which take no store password)",
    ("ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation", "ssl.protocol",
     "ssl.provider", "ssl.keystore.password", "ssl.truststore.password"))

BROKER_UNSUPPORTED: dict[str, Unsupported] = {
    **_ignored(_NO_DECOMPRESSED_BOUND, ("max.decompressed.message.bytes",)),
    # (c) features kfk does not have
    **_feature(_TIERED_STORAGE, (
        "log.local.retention.bytes", "log.local.retention.ms", "log.remote.copy.lag.bytes", "log.remote.copy.lag.ms",
        "remote.fetch.max.wait.ms",
        "remote.list.offsets.request.timeout.ms", "remote.log.index.file.cache.total.size.bytes",
        "remote.log.manager.copier.thread.pool.size", "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.copy.quota.window.num", "remote.log.manager.copy.quota.window.size.seconds",
        "remote.log.manager.expiration.thread.pool.size", "remote.log.manager.fetch.max.bytes.per.second",
        "remote.log.manager.fetch.quota.window.num", "remote.log.manager.fetch.quota.window.size.seconds",
        "remote.log.manager.task.interval.ms", "remote.log.manager.thread.pool.size",
        "remote.log.metadata.custom.metadata.max.bytes", "remote.log.metadata.manager.class.name",
        "remote.log.metadata.manager.class.path", "remote.log.metadata.manager.impl.prefix",
        "remote.log.metadata.manager.listener.name", "remote.log.reader.max.pending.tasks",
        "remote.log.reader.threads", "remote.log.storage.manager.class.name", "remote.log.storage.manager.class.path",
        "remote.log.storage.manager.impl.prefix", "remote.log.storage.system.enable")),
    **_feature(_SHARE_GROUPS, ("group.share.max.groups", "share.fetch.purgatory.purge.interval.requests")),
    **_feature("SASL/GSSAPI (Kerberos)", (
        "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
        "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor")),
    **_feature("the broker's own SASL login against a token endpoint and its refresh (KIP-768)", (
        "sasl.oauthbearer.token.endpoint.url", "sasl.login.connect.timeout.ms", "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.max.ms", "sasl.login.retry.backoff.ms", "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter")),
    **_feature("fetching from the closest replica (KIP-392)", ("replica.selector.class",)),
    **_feature("client metrics and observability (KIP-714)", ("telemetry.max.bytes",)),
    **_feature("controller mutation quotas (KIP-599)", (
        "controller.quota.window.num", "controller.quota.window.size.seconds")),
    **_feature("a metadata log directory apart from log.dirs (kfk keeps the metadata log in the first log dir)",
               ("metadata.log.dir",)),
    **_feature("taking a failed log directory offline after log.dir.failure.timeout.ms (JBOD, KIP-858)",
               ("log.dir.failure.timeout.ms",)),
    # (b) Java plug-ins and providers: refused, as a missing one would change security or policies silently
    **_refused(_JAVA_PLUGIN, (
        "alter.config.policy.class.name", "create.topic.policy.class.name", "client.quota.callback.class",
        "sasl.client.callback.handler.class", "sasl.login.callback.handler.class", "sasl.login.class",
        "ssl.engine.factory.class")),
    **_refused(_JAVA_PLUGIN, ("principal.builder.class",),
               "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    **_refused(_JAVA_PLUGIN + "; kfk validates OAUTHBEARER tokens against sasl.oauthbearer.jwks.endpoint.url "
               "itself, as Kafka's OAuthBearerValidatorCallbackHandler does",
               ("sasl.server.callback.handler.class",), *OAUTHBEARER_VALIDATOR_CALLBACK_HANDLERS),
    **_refused("Java security provider classes, which kfk cannot load (its TLS is OpenSSL's)",
               ("security.providers",)),
    # (b) Java metrics reporters: warned about, as kfk's metrics are served on metrics.port instead
    **_ignored("Java metrics reporters cannot be loaded; kfk serves its metrics in Prometheus text format on "
               "metrics.port", (
        "metric.reporters", "kafka.metrics.reporters", "kafka.metrics.polling.interval.secs", "metrics.num.samples",
        "metrics.recording.level", "metrics.sample.window.ms")),
    **_SSL_IGNORED,
    **_ignored("kfk does not reload key stores at run time, so there is no change of certificate to allow",
               ("ssl.allow.dn.changes", "ssl.allow.san.changes")),
    # (b) parts of Kafka's implementation kfk does not have
    **_ignored("kfk's broker is one asyncio event loop with executors, not Kafka's thread pools", (
        "background.threads", "num.recovery.threads.per.data.dir",
        "group.coordinator.threads", "share.coordinator.threads")),
    **_ignored("kfk bounds requests in flight by bytes (queued.max.request.bytes), not by count",
               ("queued.max.requests",)),
    **_ignored("kfk's purgatories remove completed operations at once; there is nothing to purge", (
        "fetch.purgatory.purge.interval.requests", "producer.purgatory.purge.interval.requests",
        "delete.records.purgatory.purge.interval.requests")),
    **_ignored("kfk copies a replica moved to another of its log dirs (AlterReplicaLogDirs) in one task per move, "
               "without a throttle", (
        "alter.log.dirs.replication.quota.window.num", "alter.log.dirs.replication.quota.window.size.seconds",
        "num.replica.alter.log.dirs.threads")),
    **_ignored("kfk leaves receive buffer sizes to the kernel's autotuning (a produce request of a megabyte "
               "arrives in fewer reads)", ("socket.receive.buffer.bytes", "replica.socket.receive.buffer.bytes")),
    **_ignored("kfk listens with the default backlog of asyncio", ("socket.listen.backlog.size",)),
    **_ignored("kfk reads the coordinators' topics a batch at a time, with no load buffer to size", (
        "offsets.load.buffer.size", "transaction.state.log.load.buffer.size", "share.coordinator.load.buffer.size")),
    **_ignored("kfk's cleaner sizes its buffers itself", (
        "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor")),
    **_ignored("kfk writes this checkpoint with the recovery points, every log.flush.offset.checkpoint.interval.ms",
               ("log.flush.start.offset.checkpoint.interval.ms", "replica.high.watermark.checkpoint.interval.ms")),
    **_ignored("kfk looks for logs to flush (flush.ms) every second", ("log.flush.scheduler.interval.ms",)),
    **_ignored("kfk's inter-broker requests time out per purpose (controller.socket.timeout.ms, "
               "controller.quorum.request.timeout.ms, replica.fetch.wait.max.ms plus 30 s for fetches)", (
        "request.timeout.ms", "replica.socket.timeout.ms", "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms")),
    **_ignored("kfk's group coordinator writes each request's records at once, without lingering",
               ("group.coordinator.append.linger.ms",)),
    **_ignored("kfk writes __consumer_offsets uncompressed", ("offsets.topic.compression.codec",)),
    **_ignored("kfk's share coordinator writes each request's records at once, without lingering",
               ("share.coordinator.append.linger.ms",)),
    **_ignored("kfk writes __share_group_state uncompressed", ("share.coordinator.state.topic.compression.codec",)),
    **_ignored("kfk's controller writes only when the metadata changes", ("metadata.max.idle.interval.ms",)),
    **_ignored("kfk keeps only the newest metadata snapshot and trims the metadata log behind it at every snapshot "
               "(metadata.log.max.record.bytes.between.snapshots, metadata.log.max.snapshot.interval.ms)",
               ("metadata.max.retention.bytes", "metadata.max.retention.ms")),
    **_ignored("kfk rolls the metadata log's segments at metadata.log.segment.bytes or after Kafka's default of 7 "
               "days", ("metadata.log.segment.ms",)),
    **_ignored("kfk waits for its broker registration as long as it takes",
               ("initial.broker.registration.timeout.ms",)),
    **_ignored("kfk opens every listener once the broker is ready", ("early.start.listeners",)),
    **_ignored("kfk advertises one Kafka release's API versions and has no version still in development",
               ("unstable.api.versions.enable",)),
    **_ignored("kfk retries a JWKS that failed to load at the next sasl.oauthbearer.jwks.endpoint.refresh.ms", (
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms")),
    **_ignored("the follower side (follower.replication.throttled.rate and .replicas) throttles the same "
               "replication traffic in kfk", ("leader.replication.throttled.rate",)),
    **_ignored("kfk's replication throttle is a token bucket with one second of burst, not a rate over windows",
               ("replication.quota.window.num", "replication.quota.window.size.seconds")),
}

# ---------------------------------------------------------------------------------------------------------------
# Topic keys (kfk.config.LOG_CONFIG_DEF): read from a topic's LogConfig.

_LOG = "kfk.storage.log"
_VALIDATOR = "kfk.storage.log_validator"
_CLEANER_MANAGER = "kfk.storage.cleaner_manager"

TOPIC_KEY_READERS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("kfk.config", f"{_LOG}:segment_size"),
    "internal.segment.bytes": ("kfk.config", f"{_LOG}:segment_size"),
    "segment.ms": (_LOG,),
    "segment.jitter.ms": (_LOG,),
    "segment.index.bytes": ("kfk.storage.log_loader",),
    "index.interval.bytes": ("kfk.storage.log_loader",),
    "preallocate": ("kfk.storage.log_loader",),
    "flush.messages": (_LOG,),
    "flush.ms": (_LOG,),
    "retention.bytes": (_LOG,),
    "retention.ms": (_LOG,),
    "file.delete.delay.ms": (_LOG, "kfk.storage.log_manager"),
    "cleanup.policy": ("kfk.config", f"{_LOG}:delete", f"{_CLEANER_MANAGER}:compact"),
    "delete.retention.ms": ("kfk.storage.cleaner",),
    "min.compaction.lag.ms": (_CLEANER_MANAGER,),
    "max.compaction.lag.ms": (_CLEANER_MANAGER,),
    "min.cleanable.dirty.ratio": (_CLEANER_MANAGER,),
    "max.message.bytes": (_VALIDATOR,),
    "compression.type": (_VALIDATOR,),
    "compression.gzip.level": (_VALIDATOR,),
    "compression.lz4.level": (_VALIDATOR,),
    "compression.zstd.level": (_VALIDATOR,),
    "message.timestamp.type": (_VALIDATOR,),
    "message.timestamp.before.max.ms": (_VALIDATOR,),
    "message.timestamp.after.max.ms": (_VALIDATOR,),
    "min.insync.replicas": ("kfk.replication.partition",),
    "unclean.leader.election.enable": (_CONTROLLER,),
    "follower.replication.throttled.replicas": ("kfk.replication.replica_manager",),
}

#: Topic keys kfk accepts but does not act on. A topic config is set at run time (CreateTopics, AlterConfigs), so a
#: refused value fails that request with INVALID_CONFIG; an ignored one is accepted as Kafka does.
TOPIC_UNSUPPORTED: dict[str, Unsupported] = {
    **_feature(_TIERED_STORAGE, (
        "remote.storage.enable", "local.retention.ms", "local.retention.bytes", "remote.log.copy.disable",
        "remote.log.delete.on.disable", "remote.copy.lag.ms", "remote.copy.lag.bytes")),
    **_feature(_SHARE_GROUPS, ("errors.deadletterqueue.group.enable",)),
    **_ignored(_NO_DECOMPRESSED_BOUND, ("max.decompressed.message.bytes",)),
    **_ignored("the follower side (follower.replication.throttled.replicas and .rate) throttles the same "
               "replication traffic in kfk", ("leader.replication.throttled.replicas",)),
}

# ---------------------------------------------------------------------------------------------------------------
# Client keys (kfk.client.config: producer, consumer and admin).

_NETWORK = "kfk.client.network_client"
_CLIENT_CONFIG = "kfk.client.config"
_PRODUCER = "kfk.client.producer.core"
_CONSUMER = "kfk.client.consumer.consumer"
_COORDINATOR = "kfk.client.consumer.coordinator"
_CONSUMER_FETCHER = "kfk.client.consumer.fetcher"

CLIENT_KEY_READERS: dict[str, tuple[str, ...]] = {
    "bootstrap.servers": (_NETWORK,),
    "client.id": (_NETWORK,),
    "client.rack": (_CONSUMER_FETCHER,),
    "request.timeout.ms": (_NETWORK,),
    "socket.connection.setup.timeout.ms": (_NETWORK,),
    "reconnect.backoff.ms": (_NETWORK,),
    "reconnect.backoff.max.ms": (_NETWORK,),
    "retry.backoff.ms": (_NETWORK,),
    "retry.backoff.max.ms": (_NETWORK,),
    "metadata.max.age.ms": (_NETWORK,),
    "receive.message.max.bytes": (_CLIENT_CONFIG,),
    "security.protocol": (_NETWORK, _CLIENT_CONFIG),
    "sasl.mechanism": (_CLIENT_CONFIG,),
    "sasl.username": (_CLIENT_CONFIG,),
    "sasl.password": (_CLIENT_CONFIG,),
    "sasl.jaas.config": (_CLIENT_CONFIG,),
    "sasl.oauthbearer.token": (_CLIENT_CONFIG,),
    **{name: (_TLS,) for name in (
        "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm", "ssl.key.password",
        "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location", "ssl.keystore.type",
        "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.type")},
    # producer
    "acks": (_PRODUCER,),
    "linger.ms": (_PRODUCER,),
    "batch.size": (_PRODUCER,),
    "buffer.memory": (_PRODUCER,),
    "max.block.ms": (_PRODUCER,),
    "max.request.size": (_PRODUCER,),
    "compression.type": (_PRODUCER,),
    "compression.gzip.level": (_PRODUCER,),
    "compression.lz4.level": (_PRODUCER,),
    "compression.zstd.level": (_PRODUCER,),
    "retries": (_PRODUCER,),
    "delivery.timeout.ms": (_PRODUCER,),
    "max.in.flight.requests.per.connection": (_PRODUCER,),
    "enable.idempotence": (_PRODUCER,),
    "partitioner.ignore.keys": (_PRODUCER,),
    "transactional.id": (_PRODUCER,),
    "transaction.timeout.ms": (_PRODUCER,),
    # consumer
    "group.id": (_CONSUMER,),
    "group.instance.id": (_CONSUMER,),
    "group.protocol": (_CLIENT_CONFIG,),  # group_protocol(), which the consumer calls
    "group.remote.assignor": (_CONSUMER,),
    "enable.auto.commit": (_CONSUMER,),
    "auto.commit.interval.ms": (_CONSUMER,),
    "auto.offset.reset": (_CONSUMER,),
    "session.timeout.ms": (_CONSUMER,),
    "heartbeat.interval.ms": (_CONSUMER,),
    "max.poll.interval.ms": (_CONSUMER,),
    "rebalance.timeout.ms": (_CONSUMER,),
    "max.poll.records": (_CONSUMER,),
    "fetch.min.bytes": (_CONSUMER,),
    "fetch.max.bytes": (_CONSUMER, _CLIENT_CONFIG),
    "fetch.max.wait.ms": (_CONSUMER,),
    "max.partition.fetch.bytes": (_CONSUMER,),
    "isolation.level": (_CONSUMER,),
    "partition.assignment.strategy": (_CONSUMER,),
    "check.crcs": (_CONSUMER,),
    "exclude.internal.topics": (_CONSUMER,),
    "allow.auto.create.topics": (_CONSUMER,),
    # admin
    "default.api.timeout.ms": ("kfk.client.admin",),
}

#: Client keys kfk's client accepts (for properties files written for Java clients) but does not act on: a value
#: other than the default is warned about once, when the client is created.
CLIENT_UNSUPPORTED: dict[str, Unsupported] = {
    **{name: _SSL_IGNORED[name] for name in ("ssl.protocol", "ssl.keystore.password", "ssl.truststore.password")},
    **_ignored("kfk's client keeps a broker connection open until the client closes",
               ("connections.max.idle.ms",)),
    **_ignored("kfk's sticky partitioner moves to another partition after batch.size bytes, whatever the brokers' "
               "load", ("partitioner.adaptive.partitioning.enable",)),
}
