"""The word count as a process of its own, for the tests that kill it: python -m tests.streams.wordcount_app
<bootstrap> <application.id> <input> <output> <state.dir> <processing.guarantee> [<instance>
[<statestore.cache.max.bytes>]] (the cache off by default: the tests check every update). It runs until SIGTERM
(a clean close) or SIGKILL, and prints "RUNNING" once the group has given it its tasks. Instances of one application
are told apart by <instance> (their static group membership)."""

from __future__ import annotations

import signal
import sys
import threading

from kfk.streams import KafkaStreams, State
from tests.streams.topologies import wordcount


def main() -> None:
    bootstrap, application_id, input_topic, output, state_dir, guarantee = sys.argv[1:7]
    instance = sys.argv[7] if len(sys.argv) > 7 else ""
    cache_bytes = int(sys.argv[8]) if len(sys.argv) > 8 else 0
    streams = KafkaStreams(wordcount(input_topic, output), {
        "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": state_dir,
        "processing.guarantee": guarantee, "default.key.serde": "string", "default.value.serde": "string",
        "commit.interval.ms": 100, "statestore.cache.max.bytes": cache_bytes,
        # Static membership: the restarted instance takes the killed one's place in the group at once (else the
        # group would wait for the dead member until its session times out).
        "group.instance.id": f"{application_id}{instance}", "consumer.session.timeout.ms": 6000,
        "consumer.heartbeat.interval.ms": 1000})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    streams.start()
    print(streams.wait_for_state(State.RUNNING, State.ERROR).value, flush=True)
    while not stop.wait(0.2):
        if streams.state is State.ERROR:
            print(f"ERROR {streams.error!r}", flush=True)
            sys.exit(1)
    streams.close()


if __name__ == "__main__":
    main()
