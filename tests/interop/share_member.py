"""One member of a share group for tests/interop/test_share_acceptance.py: confluent-kafka's ShareConsumer
(librdkafka's KIP-932 share consumer) in explicit acknowledgement mode, in a process of its own so that the test
can kill it -9.

    python3 -m tests.interop.share_member BOOTSTRAP TOPIC GROUP [HOLD_AFTER]

Each record gets the decision `decision(partition, offset, delivery_count)` gives (tests/interop/java/
JavaShareAcknowledger.java computes the same one), and each delivery is printed as one line once the commit that
carried its acknowledgement has answered (DELIVERY_FIELDS: wall-clock microseconds, comparable between the members'
processes on one machine; POLL_START_US is when the first poll since the previous batch began, so no fetch that
acquired the batch began before it). With HOLD_AFTER, once it has printed that many deliveries it prints the next batch with
the decision HOLD, acknowledges nothing, prints "holding" and waits to be killed. A line on stdin (or its end) makes
it close (leaving the group) and print "closed".
"""

from __future__ import annotations

import sys
import threading
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

#: What each delivery line holds, in order.
DELIVERY_FIELDS = ("partition", "offset", "delivery_count", "decision", "poll_start_us", "poll_return_us",
                   "ack_start_us", "result")
#: Out of every 100 first deliveries, about this many are rejected, and this many more released.
REJECT_PERCENT, RELEASE_PERCENT = 1, 10


def decision(partition: int, offset: int, delivery_count: int) -> str:
    """ACCEPT, RELEASE or REJECT: a hash of the record's place picks its bucket out of 100 (the same in every member
    and on every run); a record delivered again is always accepted."""
    if delivery_count > 1:
        return "ACCEPT"
    bucket = ((partition * 1_000_003 + offset) * 2_654_435_761 % 2**32 >> 16) % 100  # Knuth's multiplicative hash
    if bucket < REJECT_PERCENT:
        return "REJECT"
    return "RELEASE" if bucket < REJECT_PERCENT + RELEASE_PERCENT else "ACCEPT"


def now_us() -> int:
    return time.time_ns() // 1000


def main(bootstrap: str, topic: str, group: str, hold_after: int | None) -> None:
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit", "log_level": 3})
    consumer.subscribe([topic])
    print("joined", flush=True)
    printed = 0
    poll_start = None
    while not stop.is_set():
        # A fetch an empty poll sent may answer during the next one: the records' locks began no earlier than the
        # first poll after the last batch.
        poll_start = poll_start or now_us()
        messages = [message for message in consumer.poll(0.5) if message.error() is None]
        poll_return = now_us()
        if not messages:
            continue
        if hold_after is not None and printed >= hold_after:
            for message in messages:
                print(message.partition(), message.offset(), message.delivery_count(), "HOLD", poll_start,
                      poll_return, 0, "-")
            print("holding", flush=True)
            stop.wait()
            return
        decisions = [decision(message.partition(), message.offset(), message.delivery_count())
                     for message in messages]
        for message, chosen in zip(messages, decisions):
            consumer.acknowledge(message, AcknowledgeType[chosen])
        ack_start = now_us()
        results = {(partition.topic, partition.partition): "ok" if error is None else error.args[0].name()
                   for partition, error in consumer.commit_sync().items()}
        for message, chosen in zip(messages, decisions):
            print(message.partition(), message.offset(), message.delivery_count(), chosen, poll_start, poll_return,
                  ack_start, results.get((message.topic(), message.partition()), "unanswered"))
        printed += len(messages)
        sys.stdout.flush()
        poll_start = None
    consumer.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else None)
