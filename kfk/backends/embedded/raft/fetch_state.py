"""A follower's or observer's fetching from the leader: the fetch timeout. (A failed fetch is retried after the
retry backoff, as any request to the same replica.)

A follower that goes `controller.quorum.fetch.timeout.ms` without a successful fetch presumes its leader gone: a
voter starts a pre-vote, an observer goes back to looking for the leader among the voters. The last successful
fetch also decides pre-votes (KIP-996): a voter that heard from its leader within the fetch timeout refuses them, so
one voter's broken link to the leader cannot unseat a leader the majority still follows.

A follower whose fetch offset fell below the leader's log start is sent to a snapshot (KIP-630): while
`snapshot_id` is set it sends FetchSnapshot for the next chunk instead of Fetch, and each chunk counts as a
successful fetch.
"""

from __future__ import annotations

from dataclasses import dataclass

from kfk.backends.embedded.raft.log import OffsetAndEpoch


@dataclass(slots=True)
class FetchState:
    fetch_timeout_ms: int
    fetch_deadline_ms: int
    last_success_ms: int | None = None
    #: The leader's snapshot this follower is fetching, None while it fetches the log.
    snapshot_id: OffsetAndEpoch | None = None

    @classmethod
    def start(cls, fetch_timeout_ms: int, now_ms: int) -> FetchState:
        return cls(fetch_timeout_ms, now_ms + fetch_timeout_ms)

    def succeeded(self, now_ms: int) -> None:
        self.last_success_ms = now_ms
        self.fetch_deadline_ms = now_ms + self.fetch_timeout_ms

    def timed_out(self, now_ms: int) -> bool:
        return now_ms >= self.fetch_deadline_ms

    def heard_from_leader(self, now_ms: int) -> bool:
        return self.last_success_ms is not None and now_ms - self.last_success_ms < self.fetch_timeout_ms
