"""Connection limits, as Kafka's ConnectionQuotas: how many connections the broker, each listener and each IP address
may hold at once, and how fast new ones may be created.

The keys are Kafka's: max.connections (and listener.name.NAME.max.connections), max.connections.per.ip with
max.connections.per.ip.overrides, max.connection.creation.rate (and per listener). A connection beyond a limit is
closed as soon as it is accepted. Kafka stops accepting while a broker or listener count or rate is exceeded (the
connections wait in the listen backlog); asyncio's server cannot pause accepting, so kfk closes those too, as Kafka
does for the per-IP limit. The inter-broker listener is exempt from the broker-wide count and rate, as in Kafka: at the
broker-wide count, a new inter-broker connection is accepted and the least recently active connection of another
listener closed instead.

Creation rates are token buckets holding one second's worth of connections, refilled continuously (Kafka measures a
rate over quota windows; the bucket gives the same steady rate and allows the same one-second burst).

Rejections are logged once per LOG_INTERVAL_SECONDS per reason, with the count since the last line, so a flood of
connections does not become a flood of log lines.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kfk.common.constants import INT32_MAX
from kfk.config import BrokerConfig

__all__ = ["ConnectionQuotas", "ListenerQuota", "RateLimitedLog", "resolve_host_counts"]

log = logging.getLogger("kfk.server.network")

LOG_INTERVAL_SECONDS = 30.0


@dataclass(frozen=True)
class ListenerQuota:
    """One listener's max.connections and max.connection.creation.rate (Kafka's listener-prefixed keys)."""

    max_connections: int = INT32_MAX
    max_connection_creation_rate: int = INT32_MAX


class _TokenBucket:
    """`rate` events a second, with a burst of one second's worth; unlimited at Kafka's default (INT32 max)."""

    __slots__ = ("rate", "_tokens", "_updated", "_clock")

    def __init__(self, rate: int, clock: Callable[[], float]) -> None:
        self.rate = rate
        self._tokens = float(rate)
        self._clock = clock
        self._updated = clock()

    @property
    def unlimited(self) -> bool:
        return self.rate >= INT32_MAX

    def available(self) -> bool:
        if self.unlimited:
            return True
        now = self._clock()
        self._tokens = min(float(self.rate), self._tokens + (now - self._updated) * self.rate)
        self._updated = now
        return self._tokens >= 1.0

    def take(self) -> None:
        if not self.unlimited:
            self._tokens -= 1.0


class RateLimitedLog:
    """Warnings logged at most once per interval per key, each saying how many were held back since the last."""

    def __init__(self, interval_seconds: float = LOG_INTERVAL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._interval = interval_seconds
        self._clock = clock
        self._last: dict[str, float] = {}
        self._held_back: Counter[str] = Counter()

    def warning(self, key: str, message: str, *args: object) -> None:
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last < self._interval:
            self._held_back[key] += 1
            return
        self._last[key] = now
        held_back = self._held_back.pop(key, 0)
        if held_back:
            log.warning(message + " (and %d more like it in the last %.0f s)", *args, held_back, now - last)
        else:
            log.warning(message, *args)


def resolve_host_counts(counts: Mapping[str, int]) -> dict[str, int]:
    """max.connections.per.ip.overrides by IP address: host names resolved once, at start-up (as Kafka does)."""
    resolved: dict[str, int] = {}
    for host, count in counts.items():
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
        except OSError:
            log.warning("max.connections.per.ip.overrides: cannot resolve %s; its override is ignored", host)
            continue
        for address in addresses:
            resolved[address] = count
    return resolved


class ConnectionQuotas:
    """Counts the open connections by listener and IP address and decides whether a new one may stay."""

    def __init__(
        self,
        *,
        max_connections: int = INT32_MAX,
        max_connections_per_ip: int = INT32_MAX,
        max_connections_per_ip_overrides: Mapping[str, int] | None = None,
        max_connection_creation_rate: int = INT32_MAX,
        listeners: Mapping[str, ListenerQuota] | None = None,
        inter_broker_listener: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_connections = max_connections
        self.max_connections_per_ip = max_connections_per_ip
        self.per_ip_overrides = dict(max_connections_per_ip_overrides or {})
        self.listeners = dict(listeners or {})
        self.inter_broker_listener = inter_broker_listener
        self._broker_rate = _TokenBucket(max_connection_creation_rate, clock)
        self._listener_rates = {name: _TokenBucket(quota.max_connection_creation_rate, clock)
                                for name, quota in self.listeners.items()}
        self.total = 0
        self.by_listener: Counter[str] = Counter()
        self.by_ip: Counter[str] = Counter()
        self.rejections = RateLimitedLog(clock=clock)

    def admit(self, listener: str, ip: str) -> tuple[bool, bool]:
        """(accepted, evict): whether a new connection from `ip` on `listener` may stay (it is then counted), and
        whether the caller must close the least recently active connection of another listener to make room (an
        inter-broker connection at the broker-wide limit). A rejection is logged here."""
        limit = self.per_ip_overrides.get(ip, self.max_connections_per_ip)
        if self.by_ip[ip] >= limit:
            self.rejections.warning(f"ip {ip}", "rejected a connection from %s: it already has the maximum of %d "
                                    "connections (max.connections.per.ip)", ip, limit)
            return False, False
        quota = self.listeners.get(listener, ListenerQuota())
        if self.by_listener[listener] >= quota.max_connections:
            self.rejections.warning(f"listener {listener}", "rejected a connection on listener %s: it has the "
                                    "maximum of %d connections (max.connections)", listener, quota.max_connections)
            return False, False
        inter_broker = listener == self.inter_broker_listener
        listener_rate = self._listener_rates.get(listener)
        if listener_rate is not None and not listener_rate.available():
            self.rejections.warning(f"rate {listener}", "rejected a connection on listener %s: more than %d new "
                                    "connections a second (max.connection.creation.rate)", listener,
                                    quota.max_connection_creation_rate)
            return False, False
        if not inter_broker and not self._broker_rate.available():
            self.rejections.warning("rate", "rejected a connection on listener %s: more than %d new connections a "
                                    "second on the broker (max.connection.creation.rate)", listener,
                                    self._broker_rate.rate)
            return False, False
        evict = False
        if self.total >= self.max_connections:
            if not inter_broker or self.total - self.by_listener[listener] == 0:
                self.rejections.warning("broker", "rejected a connection on listener %s: the broker has the maximum "
                                        "of %d connections (max.connections)", listener, self.max_connections)
                return False, False
            evict = True
        if listener_rate is not None:
            listener_rate.take()
        if not inter_broker:
            self._broker_rate.take()
        self.total += 1
        self.by_listener[listener] += 1
        self.by_ip[ip] += 1
        return True, evict

    def release(self, listener: str, ip: str) -> None:
        """A connection admitted earlier closed."""
        self.total -= 1
        for counter, key in ((self.by_listener, listener), (self.by_ip, ip)):
            counter[key] -= 1
            if not counter[key]:
                del counter[key]

    @classmethod
    def from_config(cls, config: BrokerConfig, listener_names: Iterable[str], inter_broker_listener: str | None,
                    per_ip_overrides: Mapping[str, int]) -> ConnectionQuotas:
        """The quotas of a broker's config: its broker-wide keys and each listener's listener.name.NAME.* keys."""
        return cls(max_connections=config.max_connections, max_connections_per_ip=config.max_connections_per_ip,
                   max_connections_per_ip_overrides=per_ip_overrides,
                   max_connection_creation_rate=config.max_connection_creation_rate,
                   listeners=_listener_quotas(config, listener_names), inter_broker_listener=inter_broker_listener)

    def reconfigure(self, config: BrokerConfig, listener_names: Iterable[str],
                    per_ip_overrides: Mapping[str, int]) -> None:
        """The limits of a changed config (dynamic max.connections, max.connections.per.ip and its overrides,
        max.connection.creation.rate, a listener added): they apply from the next connection; the connections
        already open are counted as before and stay."""
        self.max_connections = config.max_connections
        self.max_connections_per_ip = config.max_connections_per_ip
        self.per_ip_overrides = dict(per_ip_overrides)
        self.listeners = _listener_quotas(config, listener_names)
        clock = self._broker_rate._clock
        if config.max_connection_creation_rate != self._broker_rate.rate:
            self._broker_rate = _TokenBucket(config.max_connection_creation_rate, clock)
        for name, quota in self.listeners.items():
            bucket = self._listener_rates.get(name)
            if bucket is None or bucket.rate != quota.max_connection_creation_rate:
                self._listener_rates[name] = _TokenBucket(quota.max_connection_creation_rate, clock)


def _listener_quotas(config: BrokerConfig, listener_names: Iterable[str]) -> dict[str, ListenerQuota]:
    """Each listener's listener.name.NAME.max.connections and .max.connection.creation.rate (unlimited if unset)."""
    listeners = {}
    for name in listener_names:
        max_connections = config.listener_value(name, "max.connections")
        rate = config.listener_value(name, "max.connection.creation.rate")
        listeners[name] = ListenerQuota(INT32_MAX if max_connections is None else max_connections,
                                        INT32_MAX if rate is None else rate)
    return listeners
