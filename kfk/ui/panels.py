"""One page, several panels, none of which may take the page down: each panel's data is loaded under its own time
limit, and a panel whose call fails or is too slow is shown empty with a note of what is missing and why, while the
rest of the page renders.

Why: an operator opens the console during an incident (a leader gone, a broker hung) or with a principal that may
describe but not read or configure (least privilege); a page that waits 40 s on one leaderless partition, or answers
500 because DescribeConfigs was refused, hides the partitions and lag the operator came for. Kafka's own errors name
what failed; the note adds what the console's principal would need when the error is an authorization failure.

A panel's call runs in a small thread pool and is waited for at most the panel time limit; a call that outlives it
is left to finish in the background (its Admin call has its own timeout), its answer dropped.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from kfk.errors import ErrorCode, KafkaError

__all__ = ["Panels", "AUTHORIZATION_ERRORS"]

T = TypeVar("T")

AUTHORIZATION_ERRORS = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                  ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                  ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                  ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED})
#: Panels loading at once, across every page being served (more wait their turn, within their time limit).
MAX_CONCURRENT_PANELS = 8


class Panels:
    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms
        self._executor = ThreadPoolExecutor(MAX_CONCURRENT_PANELS, thread_name_prefix="kfk-ui-panel")

    def load(self, what: str, call: Callable[[], T], default: T, needs: str | None = None) -> tuple[T, str | None]:
        """(call's answer, None), or (default, a note: "<what> not shown: <why>") when the call fails with a Kafka
        error or takes longer than the panel time limit. `needs`: the ACL the panel needs, named in the note of an
        authorization failure ("DESCRIBE_CONFIGS on the topic")."""
        # In the request's context: with --auth sasl the operator's own client is found there (operator_sessions).
        future = self._executor.submit(contextvars.copy_context().run, call)
        try:
            return future.result(self.timeout_ms / 1000), None
        except FutureTimeout:
            return default, f"{what} not shown: the cluster did not answer within {self.timeout_ms / 1000:g} s"
        except (KafkaError, ValueError) as error:
            note = f"{what} not shown: {error}"
            if needs and getattr(error, "error_code", None) in AUTHORIZATION_ERRORS:
                note += f" (this needs {needs}, which the console's principal does not have)"
            return default, note

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
