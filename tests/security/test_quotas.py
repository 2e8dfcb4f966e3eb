"""The quota managers' arithmetic, driven by explicit times: Kafka's sampled rate and throttle time, the precedence
of quota entities and who shares a rate."""

from __future__ import annotations

from kfk.common.client_quotas import ClientQuotaEntity
from kfk.security.quotas import ClientQuotaManager, ClientQuotaManagers

E = ClientQuotaEntity.of


def manager(quotas: dict, samples: int = 11, key: str = "producer_byte_rate", **kw) -> ClientQuotaManager:
    quota = ClientQuotaManager(key, samples, 1, **kw)
    quota.update(quotas)
    return quota


def test_without_a_quota_nothing_is_enabled_or_throttled() -> None:
    managers = ClientQuotaManagers(11, 1)
    managers.update({E([("client-id", "c")]): {"consumer_byte_rate": 10.0}})
    assert (managers.produce.enabled, managers.fetch.enabled, managers.request.enabled) == (False, True, False)
    assert managers.produce.record_and_get_throttle_time_ms("u", "c", 10**9, 0) == 0


def test_throttle_time_brings_the_rate_back_to_the_quota() -> None:
    # 3 samples of 1 s: a young rate is measured over at least 2 s. 200 bytes at once is 100 B/s against a quota
    # of 50: (100 - 50) / 50 * 2000 ms = 2000 ms (Kafka's figure for these numbers).
    quota = manager({E([("client-id", "c")]): {"producer_byte_rate": 50.0}}, samples=3)
    assert quota.record_and_get_throttle_time_ms("u", "c", 100, 0) == 0  # 50 B/s: at the quota, not above
    assert quota.record_and_get_throttle_time_ms("u", "c", 100, 0) == 2000
    # Three seconds later the first sample has expired: the rate is measured anew.
    assert quota.record_and_get_throttle_time_ms("u", "c", 10, 3000) == 0


def test_rates_over_full_windows() -> None:
    quota = manager({E([("client-id", "c")]): {"producer_byte_rate": 100.0}}, samples=11)
    for second in range(10):  # 100 B every second: exactly the quota
        assert quota.record_and_get_throttle_time_ms("u", "c", 100, second * 1000) == 0
    # 10 s measured; 1000 + 1100 more in the eleventh second = 2100 B over 10.5 s = 200 B/s: 100 % over, 10.5 s.
    assert quota.record_and_get_throttle_time_ms("u", "c", 1100, 10_500) == 10_500


def test_precedence_and_who_shares_a_rate() -> None:
    quotas = {
        E([("user", "alice"), ("client-id", "c1")]): {"producer_byte_rate": 1.0},
        E([("user", "alice")]): {"producer_byte_rate": 2.0},
        E([("user", None), ("client-id", None)]): {"producer_byte_rate": 3.0},
        E([("client-id", "c9")]): {"producer_byte_rate": 4.0},
        E([("client-id", None)]): {"producer_byte_rate": 5.0, "consumer_byte_rate": 6.0},
    }
    quota = manager(quotas)
    assert quota.quota("alice", "c1") == 1.0
    assert quota.quota("alice", "c2") == 2.0  # alice's own quota, shared by her clients
    assert quota.quota("bob", "c9") == 3.0  # <default> user + <default> client-id comes before client-id c9
    fetch = manager(quotas, key="consumer_byte_rate")
    assert fetch.quota("bob", "c9") == 6.0  # per key: only the <default> client-id sets consumer_byte_rate
    assert manager({E([("client-id", "c9")]): {"producer_byte_rate": 4.0}}).quota("bob", "c9") == 4.0
    assert manager({}).quota("bob", "c9") is None

    # alice's clients c2 and c3 share her rate; bob and carol each have a rate of their own under the defaults.
    quota = manager({E([("user", "alice")]): {"producer_byte_rate": 100.0},
                     E([("user", None)]): {"producer_byte_rate": 100.0}}, samples=2)
    assert quota.record_and_get_throttle_time_ms("alice", "c2", 100, 0) == 0
    assert quota.record_and_get_throttle_time_ms("alice", "c3", 100, 0) > 0
    assert quota.record_and_get_throttle_time_ms("bob", "c2", 100, 0) == 0
    assert quota.record_and_get_throttle_time_ms("carol", "c2", 100, 0) == 0


def test_request_throttling_is_bounded_by_one_window_and_fetches_by_the_window() -> None:
    quota = manager({E([("client-id", "c")]): {"request_percentage": 1.0}}, key="request_percentage",
                    max_throttle_time_ms=1000)
    assert quota.record_and_get_throttle_time_ms("u", "c", 500.0, 0) == 1000
    fetch = manager({E([("client-id", "c")]): {"consumer_byte_rate": 1000.0}}, key="consumer_byte_rate")
    assert fetch.max_value_in_quota_window("u", "c") == 10_000
    assert fetch.max_value_in_quota_window("u", "other") is None


def test_a_quota_altered_live_applies_to_the_next_request() -> None:
    quota = manager({E([("client-id", "c")]): {"producer_byte_rate": 10.0}}, samples=2)
    assert quota.record_and_get_throttle_time_ms("u", "c", 100, 0) > 0
    quota.update({E([("client-id", "c")]): {"producer_byte_rate": 1000.0}})
    assert quota.record_and_get_throttle_time_ms("u", "c", 100, 10) == 0
    quota.update({})
    assert not quota.enabled and quota.record_and_get_throttle_time_ms("u", "c", 10**9, 20) == 0


def test_the_rates_of_clients_gone_for_an_hour_are_dropped() -> None:
    quota = manager({E([("client-id", None)]): {"producer_byte_rate": 10.0}}, samples=2)
    assert quota.record_and_get_throttle_time_ms("u", "old", 100, 0) > 0
    quota.record_and_get_throttle_time_ms("u", "new", 1, 3600 * 1000 + 1)  # a new client: the old one's rate goes
    assert set(quota._rates) == {("", "new")}
