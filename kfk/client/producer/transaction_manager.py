"""The idempotent producer's state (Java keeps it in TransactionManager; kfk does idempotence, not transactions).

With enable.idempotence the producer gets a producer id and epoch from InitProducerId, and numbers the records of
every partition from 0: a batch carries the sequence of its first record (base_sequence). The broker keeps the last
five batches' sequences per producer and partition, so a retried batch is recognised (acknowledged again, not
appended twice) and a gap is refused (OUT_OF_ORDER_SEQUENCE_NUMBER). The client side of that contract:
- sequences are assigned when a batch is first drained and never change on retry;
- at most max.in.flight.requests.per.connection (<= 5) batches of a partition are unacknowledged at once;
- a retried batch goes back in sequence order, so the broker sees sequences in order again;
- when a batch fails for good after sequences were spent (or the broker forgot the producer: UNKNOWN_PRODUCER_ID),
  the sequence numbering is broken; the producer then asks for a new producer id (epoch bump in Kafka 2.5+ terms) and
  restarts every partition at sequence 0, so later batches are accepted.
"""

from __future__ import annotations

from kfk.common.structs import TopicPartition
from kfk.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from kfk.records.batch import increment_sequence

__all__ = ["TransactionManager"]


class TransactionManager:
    def __init__(self, max_in_flight: int) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.max_in_flight = max_in_flight
        self._next_sequence: dict[TopicPartition, int] = {}
        self._last_acked_sequence: dict[TopicPartition, int] = {}
        self._in_flight: dict[TopicPartition, int] = {}
        self.needs_reset = True

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID and not self.needs_reset

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._next_sequence.clear()
        self._last_acked_sequence.clear()
        self.needs_reset = False

    def request_reset(self) -> None:
        """Sequences are broken: get a new producer id before sending more."""
        self.needs_reset = True

    def can_send(self, topic_partition: TopicPartition, is_retry: bool) -> bool:
        """Room for another unacknowledged batch of this partition (retries always go, they already count)."""
        return is_retry or self._in_flight.get(topic_partition, 0) < self.max_in_flight

    def next_sequence(self, topic_partition: TopicPartition, record_count: int) -> int:
        """Assign the base sequence of a new batch and advance the partition's counter."""
        sequence = self._next_sequence.get(topic_partition, 0)
        self._next_sequence[topic_partition] = increment_sequence(sequence, record_count)
        return sequence

    def batch_sent(self, topic_partition: TopicPartition) -> None:
        self._in_flight[topic_partition] = self._in_flight.get(topic_partition, 0) + 1

    def batch_done(self, topic_partition: TopicPartition) -> None:
        count = self._in_flight.get(topic_partition, 0) - 1
        if count > 0:
            self._in_flight[topic_partition] = count
        else:
            self._in_flight.pop(topic_partition, None)

    def acknowledged(self, topic_partition: TopicPartition, last_sequence: int) -> None:
        previous = self._last_acked_sequence.get(topic_partition, -1)
        if last_sequence > previous:
            self._last_acked_sequence[topic_partition] = last_sequence

    def is_next_expected(self, topic_partition: TopicPartition, base_sequence: int) -> bool:
        """True when ``base_sequence`` directly follows the last acknowledged one: an OUT_OF_ORDER_SEQUENCE_NUMBER
        for such a batch is real (the broker lost state), not the echo of an earlier batch's failure."""
        return base_sequence == self._last_acked_sequence.get(topic_partition, -1) + 1
