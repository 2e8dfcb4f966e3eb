"""A dynamic num.replica.fetchers: the followed partitions are spread over the new number of fetchers per leader,
keeping their leader epochs, and the fetchers left empty stop."""

from __future__ import annotations

import asyncio
import socket

from kfk.common.structs import TopicPartition
from kfk.config import BrokerConfig
from kfk.replication.replica_fetcher import ReplicaFetcherManager, fetcher_id


def test_resize_moves_followed_partitions_to_the_new_number_of_fetchers(tmp_path) -> None:
    async def scenario() -> None:
        with socket.socket() as leader:  # a leader that accepts connections and never answers
            leader.bind(("127.0.0.1", 0))
            leader.listen()
            port = leader.getsockname()[1]
            config = BrokerConfig({"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181",
                                   "log.dirs": str(tmp_path)})
            manager = ReplicaFetcherManager(1, config, lambda tp: None, None, lambda: 0)
            partitions = [TopicPartition(topic, index) for topic in ("a", "b") for index in range(4)]
            for epoch, topic_partition in enumerate(partitions):
                manager.add_partition(topic_partition, 2, epoch, "127.0.0.1", port)
            assert set(manager.fetchers) == {(2, 0)}

            config.reconfigure({"num.replica.fetchers": "3"}, {})
            manager.resize()
            assert set(manager.assignment.values()) == set(manager.fetchers) == {
                (2, fetcher_id(topic_partition, 3)) for topic_partition in partitions}
            assert len(manager.fetchers) > 1
            for epoch, topic_partition in enumerate(partitions):
                key = manager.assignment[topic_partition]
                assert key == (2, fetcher_id(topic_partition, 3))
                assert manager.fetchers[key].partitions[topic_partition].leader_epoch == epoch

            config.reconfigure({}, {})
            manager.resize()
            assert set(manager.fetchers) == {(2, 0)} and len(manager.fetchers[(2, 0)].partitions) == 8
            await manager.shutdown()

    asyncio.run(scenario())
