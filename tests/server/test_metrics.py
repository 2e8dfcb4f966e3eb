"""The request metrics' histograms as Prometheus reads them: `le` buckets (a value equal to a bound counts in it),
cumulative counts, +Inf last; and Kafka's request names."""

from __future__ import annotations

from kfk.server.metrics import TIME_BUCKETS_MS, RequestMetrics, request_name


def test_buckets_are_cumulative_and_inclusive() -> None:
    metrics = RequestMetrics()
    for total_ms in (0.5, 0.51, 1.0, 7.0, 40_000.0):
        metrics.observe(0, queue_s=0.0, total_s=total_ms / 1000)
    count, total, queue = metrics.by_api[0]
    assert count == [5]
    buckets = dict(total.buckets())
    assert buckets["0.5"] == 1  # 0.5 <= 0.5
    assert buckets["1.0"] == 3  # 0.51 and 1.0 join it
    assert buckets["5.0"] == 3
    assert buckets["10.0"] == 4  # 7 ms
    assert buckets[str(TIME_BUCKETS_MS[-1])] == 4
    assert buckets["+Inf"] == 5  # 40 s is beyond the last bound
    assert list(buckets)[-1] == "+Inf"
    assert abs(total.sum - (0.5 + 0.51 + 1.0 + 7.0 + 40_000.0)) < 1e-6
    assert dict(queue.buckets())["0.5"] == 5


def test_kafkarequest_names() -> None:
    assert [request_name(key) for key in (0, 1, 3, 18, 19)] == [
        "Produce", "Fetch", "Metadata", "ApiVersions", "CreateTopics"]
    assert request_name(9999) == "9999"
