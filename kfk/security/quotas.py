"""Client quota enforcement: produce and fetch byte rates and request time per (user, client-id), as Kafka's
ClientQuotaManager and ClientRequestQuotaManager measure and throttle them.

A quota is looked up in Kafka's precedence (DefaultQuotaCallback), the first entity that sets the key winning:
user+client-id, user+<default> client-id, user, <default> user+client-id, <default> user+<default> client-id,
<default> user, client-id, <default> client-id. Which level matched also says who shares a rate: a user's quota is
shared by all of that user's clients, a client-id quota by every user of that client-id, a quota on both by that pair
only (the <default> entities give each user or client-id a rate of its own).

A rate is Kafka's sampled Rate: quota.window.num samples of quota.window.size.seconds, each sample starting when the
first value after the previous one's end is recorded; samples older than all the windows are reset; the elapsed time
is at least (window.num - 1) windows, so a new client is measured over the whole span rather than its first
milliseconds. A request is recorded first, then the rate checked: above the quota, the throttle time is
(rate - quota) / quota * elapsed, so that after that long the rate is back at the quota (request time: bounded by one
window, as Kafka bounds it).

The broker asks `enabled` first: with no quota of a kind in the metadata nothing is recorded or looked up, so a
cluster without quotas pays one attribute read per request.
"""

from __future__ import annotations

from typing import Mapping

from kfk.common.client_quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    USER,
    ClientQuotaEntity,
)

__all__ = ["ClientQuotaManager", "ClientQuotaManagers", "quota_lookup_order"]

#: A rate nobody recorded into for this long is dropped (Kafka expires inactive quota sensors after an hour).
INACTIVE_RATE_EXPIRATION_MS = 3600 * 1000
#: The lookup cache of (user, client-id) -> quota is emptied past this many entries (it refills as clients come).
MAX_RESOLVED = 100_000

#: Request time is recorded as a percentage of one handler thread: a request that held the loop 10 ms counts 1 (%
#: of a second), so a rate over the window is a percentage of the loop's time.
NANOS_TO_PERCENTAGE_PER_SECOND = 100 / 1e9


def quota_lookup_order(user: str, client_id: str) -> list[tuple[ClientQuotaEntity, tuple[str, str]]]:
    """The entities whose quota applies to (user, client_id), most specific first, each with the (user, client-id)
    its rate is shared under ("" for the part that is not shared on)."""
    of = ClientQuotaEntity.of
    return [
        (of([(USER, user), (CLIENT_ID, client_id)]), (user, client_id)),
        (of([(USER, user), (CLIENT_ID, None)]), (user, client_id)),
        (of([(USER, user)]), (user, "")),
        (of([(USER, None), (CLIENT_ID, client_id)]), (user, client_id)),
        (of([(USER, None), (CLIENT_ID, None)]), (user, client_id)),
        (of([(USER, None)]), (user, "")),
        (of([(CLIENT_ID, client_id)]), ("", client_id)),
        (of([(CLIENT_ID, None)]), ("", client_id)),
    ]


class _SampledRate:
    """Kafka's Rate over a SampledStat: per-second rate of what was recorded in the live samples."""

    __slots__ = ("starts", "totals", "current")

    def __init__(self, now_ms: int) -> None:
        self.starts = [now_ms]
        self.totals = [0.0]
        self.current = 0

    def record(self, value: float, now_ms: int, window_ms: int, samples: int) -> None:
        current = self.current
        if now_ms - self.starts[current] >= window_ms:  # the current sample is complete: start the next
            current = self.current = (current + 1) % samples
            if current == len(self.starts):
                self.starts.append(now_ms)
                self.totals.append(0.0)
            else:
                self.starts[current] = now_ms
                self.totals[current] = 0.0
        self.totals[current] += value

    def measure(self, now_ms: int, window_ms: int, samples: int) -> tuple[float, int]:
        """(rate per second, the elapsed time in ms it was measured over)."""
        starts, totals = self.starts, self.totals
        expire_ms = samples * window_ms
        for index, start in enumerate(starts):
            if now_ms - start >= expire_ms:  # obsolete: reset, as Kafka's purgeObsoleteSamples
                starts[index] = now_ms
                totals[index] = 0.0
        elapsed_ms = now_ms - min(starts)
        full_windows = elapsed_ms // window_ms
        if full_windows < samples - 1:
            elapsed_ms += (samples - 1 - full_windows) * window_ms
        elapsed_ms = max(elapsed_ms, 1)
        return sum(totals) * 1000 / elapsed_ms, elapsed_ms


class ClientQuotaManager:
    """One kind of quota (one key: producer_byte_rate, consumer_byte_rate or request_percentage)."""

    def __init__(self, quota_key: str, window_num: int, window_size_seconds: int,
                 max_throttle_time_ms: int | None = None) -> None:
        self.quota_key = quota_key
        self.samples = window_num
        self.window_ms = window_size_seconds * 1000
        self.max_throttle_time_ms = max_throttle_time_ms
        #: Whether any entity sets this quota: when not, the broker records nothing.
        self.enabled = False
        self._quotas: Mapping[ClientQuotaEntity, Mapping[str, float]] = {}
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float] | None] = {}
        self._rates: dict[tuple[str, str], _SampledRate] = {}

    def update(self, quotas: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        """New quotas from the metadata: they apply to the next request (the rates measured so far are kept, so a
        client already over a lowered quota is throttled at once)."""
        self._quotas = quotas
        self._resolved.clear()
        self.enabled = any(self.quota_key in values for values in quotas.values())

    def _resolve(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        key = (user, client_id)
        if key in self._resolved:
            return self._resolved[key]
        if len(self._resolved) >= MAX_RESOLVED:
            self._resolved.clear()
        resolved = None
        for entity, shared_as in quota_lookup_order(user, client_id):
            values = self._quotas.get(entity)
            if values is not None and self.quota_key in values:
                resolved = (shared_as, values[self.quota_key])
                break
        self._resolved[key] = resolved
        return resolved

    def quota(self, user: str, client_id: str) -> float | None:
        """The quota that applies to (user, client_id), None if none does."""
        resolved = self._resolve(user, client_id)
        return None if resolved is None else resolved[1]

    def record_and_get_throttle_time_ms(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` for the client and return how long it must be throttled (0: within its quota)."""
        resolved = self._resolve(user, client_id)
        if resolved is None:
            return 0
        shared_as, bound = resolved
        rate = self._rates.get(shared_as)
        if rate is None:
            self._expire_inactive(now_ms)
            rate = self._rates[shared_as] = _SampledRate(now_ms)
        rate.record(value, now_ms, self.window_ms, self.samples)
        measured, elapsed_ms = rate.measure(now_ms, self.window_ms, self.samples)
        if measured <= bound:
            return 0
        throttle_ms = round((measured - bound) / bound * elapsed_ms)
        if self.max_throttle_time_ms is not None:
            throttle_ms = min(throttle_ms, self.max_throttle_time_ms)
        return throttle_ms

    def _expire_inactive(self, now_ms: int) -> None:
        """Drop the rates of clients gone for an hour (checked when a new one starts: no cost per request)."""
        expired = [key for key, rate in self._rates.items()
                   if now_ms - rate.starts[rate.current] > INACTIVE_RATE_EXPIRATION_MS]
        for key in expired:
            del self._rates[key]

    def max_value_in_quota_window(self, user: str, client_id: str) -> float | None:
        """The most a client may take at once: its quota over all but one window (Kafka bounds a consumer's fetch
        size by it); None without a quota."""
        bound = self.quota(user, client_id)
        return None if bound is None else bound * (self.samples - 1) * self.window_ms / 1000


class ClientQuotaManagers:
    """The broker's three enforced quotas, fed with the metadata image's client quotas."""

    def __init__(self, window_num: int, window_size_seconds: int) -> None:
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window_num, window_size_seconds)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window_num, window_size_seconds)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, window_num, window_size_seconds,
                                          max_throttle_time_ms=window_size_seconds * 1000)
        self._quotas: Mapping[ClientQuotaEntity, Mapping[str, float]] | None = None

    def update(self, quotas: Mapping[ClientQuotaEntity, Mapping[str, float]]) -> None:
        if quotas is self._quotas:
            return  # the image changed elsewhere: its quotas are the same object
        self._quotas = quotas
        for manager in (self.produce, self.fetch, self.request):
            manager.update(quotas)
