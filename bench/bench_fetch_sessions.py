"""Incremental fetch sessions (KIP-227): broker CPU and bytes per Fetch of a 1,000-partition follower or consumer
whose partitions are mostly idle, with and without a session.

    python bench/bench_fetch_sessions.py [--partitions 1000] [--fetches 2000]

A broker runs in this process (no sockets: the figure is the broker's work from header decode to response encode,
the steadiest on a shared machine). Every partition holds one batch; the fetcher is at the log end of all of them.
Each round, one partition (round-robin) receives a new batch and the fetcher asks again from its position:
- sessionless (epoch -1, as librdkafka and aiokafka fetch): the request names all partitions, the response answers
  all of them;
- incremental session (epoch >= 1, as the Java client, kafka-python, franz-go and kfk's followers fetch): the
  request names only the partition whose position moved, the response only the partition with news.
Reported: broker CPU µs per Fetch (time.process_time over --fetches), request and response bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import wire_load  # noqa: E402  (bench/ is not a package)
from bench_produce_requests import _body, in_process_broker  # noqa: E402

from kfk.protocol.headers import decode_response  # noqa: E402
from kfk.protocol.messages.fetch import FetchRequest  # noqa: E402
from kfk.protocol.messages.produce import ProduceRequest  # noqa: E402
from kfk.storage.fetch_data_info import FileRegion  # noqa: E402

TOPIC = "sessions"
FETCH_VERSION = 12


def produce(partition: int, batch: bytes) -> bytearray:
    return _body(ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[ProduceRequest.TopicProduceData(
        name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=batch)])]),
        wire_load.PRODUCE_VERSION)


def fetch_request(positions: dict[int, int], session_id: int, epoch: int) -> bytearray:
    return _body(FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, session_id=session_id,
                              session_epoch=epoch, topics=[FetchRequest.FetchTopic(topic=TOPIC, partitions=[
                                  FetchRequest.FetchPartition(partition=index, fetch_offset=offset,
                                                              partition_max_bytes=1 << 20)
                                  for index, offset in positions.items()])] if positions else []), FETCH_VERSION)


def response_bytes(chunks) -> bytes:
    return b"".join(chunk.read_bytes() if isinstance(chunk, FileRegion) else bytes(chunk) for chunk in chunks)


async def run(partitions: int, fetches: int) -> list[tuple[str, float, float, float]]:
    async with in_process_broker(TOPIC, partitions) as dispatch:
        batch, _ = wire_load.build_batch(100, 1000)
        for index in range(partitions):
            await dispatch(produce(index, batch))
        results = []
        for name in ("sessionless", "incremental session"):
            positions = dict.fromkeys(range(partitions), 0)
            # Catch up first (untimed): every partition read to its end, and the session opened.
            chunks = await dispatch(fetch_request(positions, 0, 0 if name != "sessionless" else -1))
            _, response = decode_response(response_bytes(chunks)[4:], 1, FETCH_VERSION)
            session_id, epoch = response.session_id, 1
            for topic in response.responses:
                for data in topic.partitions:
                    positions[data.partition_index] = data.high_watermark
            moved = dict.fromkeys(range(partitions), 0)  # the positions the session was opened with
            request_total = response_total = 0
            cpu = 0.0
            for round_index in range(fetches):
                await dispatch(produce(round_index % partitions, batch))
                if name == "sessionless":
                    request = fetch_request(positions, 0, -1)
                else:
                    request = fetch_request({index: positions[index] for index in positions
                                             if positions[index] != moved[index]}, session_id, epoch)
                    moved = dict(positions)
                    epoch += 1
                start = time.process_time()
                chunks = await dispatch(request)
                cpu += time.process_time() - start
                data_bytes = response_bytes(chunks)
                request_total += len(request)
                response_total += len(data_bytes)
                _, response = decode_response(data_bytes[4:], 1, FETCH_VERSION)
                assert response.error_code == 0, response.error_code
                for topic in response.responses:
                    for data in topic.partitions:
                        positions[data.partition_index] = data.high_watermark
            results.append((name, cpu / fetches * 1e6, request_total / fetches, response_total / fetches))
        return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--fetches", type=int, default=2000)
    args = parser.parse_args()
    results = asyncio.run(run(args.partitions, args.fetches))
    print(f"{args.partitions} partitions, one with news per fetch, {args.fetches} fetches")
    print(f"{'fetch':<22} {'broker CPU µs/fetch':>20} {'request bytes':>14} {'response bytes':>15}")
    for name, micros, request_bytes, response_bytes_ in results:
        print(f"{name:<22} {micros:>20,.0f} {request_bytes:>14,.0f} {response_bytes_:>15,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
