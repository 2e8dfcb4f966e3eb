"""The KTable-KTable foreign-key join (KIP-213): the processors and wire formats behind
``KTable.join(other, foreign_key_extractor, joiner)`` and ``left_join``, as Kafka Streams lays them out, so that the
internal topics and the subscription store's changelog hold the bytes a Java application writes.

The left table's rows live on its partitions, the right table's on the foreign key's; the join is a round trip:
1. each left update subscribes its key to its foreign key (a SubscriptionWrapper on the subscription registration
   topic, keyed by the foreign key, so it reaches the right table's partition), unsubscribing from the old one;
2. the right side keeps the subscriptions (subscription store, keyed by foreign key then primary key) and answers
   each with the foreign row (a SubscriptionResponseWrapper on the response topic, keyed by the primary key, to the
   partition the left row came from); an update of a right row answers every subscriber of it;
3. the left side joins each answer with the row's current value, unless the answer was for an older value: every
   subscription carries a hash (Murmur3, 128 bits) of the left value it was sent for, and an answer whose hash is
   not the current value's is stale and dropped.
"""

from __future__ import annotations

import enum
import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from kfk.streams.processor import Change, Processor, Record
from kfk.streams.serdes import Serde

log = logging.getLogger("kfk.streams")

_MASK64 = 0xFFFFFFFFFFFFFFFF
_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F
#: Kafka's Murmur3.DEFAULT_SEED.
MURMUR3_SEED = 104729


def _rotl(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (64 - shift))) & _MASK64


def _fmix(value: int) -> int:
    value ^= value >> 33
    value = (value * 0xFF51AFD7ED558CCD) & _MASK64
    value ^= value >> 33
    value = (value * 0xC4CEB9FE1A85EC53) & _MASK64
    return value ^ (value >> 33)


def murmur3_hash128(data: bytes, seed: int = MURMUR3_SEED) -> tuple[int, int]:
    """MurmurHash3 x64 128-bit (the public-domain reference algorithm) of ``data``, as Kafka Streams' hash128:
    two signed 64-bit halves."""
    h1 = h2 = seed & _MASK64
    length = len(data)
    blocks = length // 16
    for k1, k2 in struct.iter_unpack("<QQ", data[:blocks * 16]):
        h1 ^= (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
        h1 = ((_rotl(h1, 27) + h2) * 5 + 0x52DCE729) & _MASK64
        h2 ^= (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
        h2 = ((_rotl(h2, 31) + h1) * 5 + 0x38495AB5) & _MASK64
    tail = data[blocks * 16:]
    if len(tail) > 8:
        k2 = int.from_bytes(tail[8:], "little")
        h2 ^= (_rotl((k2 * _C2) & _MASK64, 33) * _C1) & _MASK64
    if tail:
        k1 = int.from_bytes(tail[:8], "little")
        h1 ^= (_rotl((k1 * _C1) & _MASK64, 31) * _C2) & _MASK64
    h1 ^= length
    h2 ^= length
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK64
    h2 = (h2 + h1) & _MASK64
    return tuple(value - (1 << 64) if value >> 63 else value for value in (h1, h2))  # type: ignore[return-value]


class Instruction(enum.IntEnum):
    """What the right side does with a subscription (Kafka's SubscriptionWrapper.Instruction)."""

    DELETE_KEY_NO_PROPAGATE = 0  # unsubscribe, answer nothing
    DELETE_KEY_AND_PROPAGATE = 1  # unsubscribe, answer with no row (the result is deleted)
    PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = 2  # subscribe, answer with the row or with none
    PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = 3  # subscribe, answer only if the row exists


_HASH = struct.Struct(">qq")
_INT = struct.Struct(">i")
_HASH_NULL = 0x80
#: The SubscriptionWrapper version Kafka writes (1: with the left row's partition at the end).
SUBSCRIPTION_VERSION = 1
#: The SubscriptionResponseWrapper version Kafka writes.
RESPONSE_VERSION = 0


@dataclass(frozen=True)
class Subscription:
    """A SubscriptionWrapper: ``{hash-is-null bit, 7-bit version}{instruction}{16-byte hash, when there is
    one}{primary key bytes}{4-byte primary partition}``."""

    hash: tuple[int, int] | None
    instruction: Instruction
    primary_key: bytes
    #: The left row's partition, where the answer goes (None in a version 0 subscription: the key decides).
    primary_partition: int | None

    def serialize(self) -> bytes:
        head = bytes([SUBSCRIPTION_VERSION | (_HASH_NULL if self.hash is None else 0), self.instruction])
        hashed = b"" if self.hash is None else _HASH.pack(*self.hash)
        return head + hashed + self.primary_key + _INT.pack(self.primary_partition or 0)

    @classmethod
    def deserialize(cls, data: bytes) -> Subscription:
        version, hashed = data[0] & 0x7F, not data[0] & _HASH_NULL
        position = 2 + (_HASH.size if hashed else 0)
        end = len(data) - (_INT.size if version > 0 else 0)
        return cls(_HASH.unpack_from(data, 2) if hashed else None, Instruction(data[1]), data[position:end],
                   _INT.unpack_from(data, end)[0] if version > 0 else None)


def serialize_response(hash_: tuple[int, int] | None, foreign_value: bytes | None) -> bytes:
    """A SubscriptionResponseWrapper: ``{hash-is-null bit, 7-bit version}{16-byte hash}{foreign value bytes}``."""
    head = bytes([RESPONSE_VERSION | (_HASH_NULL if hash_ is None else 0)])
    return head + (b"" if hash_ is None else _HASH.pack(*hash_)) + (foreign_value or b"")


def deserialize_response(data: bytes) -> tuple[tuple[int, int] | None, bytes | None]:
    if data[0] & _HASH_NULL:
        return None, data[1:] or None
    return _HASH.unpack_from(data, 1), data[1 + _HASH.size:] or None


def combined_key(foreign_key: bytes, primary_key: bytes) -> bytes:
    """The subscription store's key (Kafka's CombinedKeySchema): the foreign key's length (4 bytes), the foreign
    key, then the primary key, so that one foreign key's subscribers are one prefix."""
    return _INT.pack(len(foreign_key)) + foreign_key + primary_key


def _resolve(serde: Serde | None, default: Serde, topic: str) -> Serde:
    return (serde or default).for_topic(topic)


class Registration(NamedTuple):
    """A subscription on its way to the registration topic: its bytes, and the foreign key it is keyed by (for a
    TableJoined's other partitioner, which partitions by the right table's key)."""

    foreign_key: Any
    subscription: bytes

    def serialize(self) -> bytes:
        return self.subscription


class SubscriptionSend(Processor):
    """The left table's updates as subscriptions (Kafka's SubscriptionSendProcessorSupplier): the foreign key's
    bytes as the key, the subscription (a Registration, serialized by the registration topic's sink) as the
    value."""

    def __init__(self, extractor: Callable[[Any], Any], left_join: bool, foreign_key_serde: Serde | None,
                 key_serde: Serde | None, value_serde: Serde | None, topic: str) -> None:
        self.extractor, self.left_join, self.topic = extractor, left_join, topic
        self.serdes = (foreign_key_serde, key_serde, value_serde)

    def init(self, context: Any) -> None:
        super().init(context)
        foreign_key_serde, key_serde, value_serde = self.serdes
        self.foreign_keys = _resolve(foreign_key_serde, context.key_serde(), self.topic)
        self.keys = _resolve(key_serde, context.key_serde(), self.topic)
        self.values = _resolve(value_serde, context.value_serde(), self.topic)

    def process(self, record: Record) -> None:
        change: Change = record.value
        old, new = change.old_value, change.new_value
        old_key = None if old is None else self.extractor(old)
        new_key = None if new is None else self.extractor(new)
        hash_ = None if new is None else murmur3_hash128(self.values.serialize(new))
        send = _Sender(self, record, hash_)
        if self.left_join:
            if old is None and new is None:
                return
            if old_key is not None and self._bytes(new_key) != self._bytes(old_key):
                send(old_key, Instruction.DELETE_KEY_NO_PROPAGATE)
            send(new_key, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
        elif new is not None:
            if new_key is None:
                log.warning("Skipping record due to null foreign key. topic=%s", self.context.record_metadata())
                if old_key is not None:
                    send(old_key, Instruction.DELETE_KEY_AND_PROPAGATE)
            elif old_key is None:
                send(new_key, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)
            elif self._bytes(new_key) != self._bytes(old_key):
                send(old_key, Instruction.DELETE_KEY_NO_PROPAGATE)
                send(new_key, Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)
            else:  # same foreign key: only a join changes anything (no join now means none before either)
                send(new_key, Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)
        elif old_key is not None:
            send(old_key, Instruction.DELETE_KEY_AND_PROPAGATE)

    def _bytes(self, foreign_key: Any) -> bytes | None:
        return None if foreign_key is None else self.foreign_keys.serialize(foreign_key)


class _Sender:
    def __init__(self, processor: SubscriptionSend, record: Record, hash_: tuple[int, int] | None) -> None:
        self.processor, self.record, self.hash = processor, record, hash_

    def __call__(self, foreign_key: Any, instruction: Instruction) -> None:
        processor, record = self.processor, self.record
        metadata = processor.context.record_metadata()
        subscription = Subscription(self.hash, instruction, processor.keys.serialize(record.key),
                                    metadata.partition if metadata is not None else 0)
        processor.context.forward(Record(processor._bytes(foreign_key),
                                         Registration(foreign_key, subscription.serialize()), record.timestamp,
                                         record.headers))


class SubscriptionReceive(Processor):
    """The right side's receipt of a subscription (Kafka's SubscriptionReceiveProcessorSupplier): kept in (or, to
    unsubscribe, removed from) the subscription store under (foreign key, primary key), then passed on."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name

    def process(self, record: Record) -> None:
        subscription = Subscription.deserialize(record.value)
        if record.key is None:
            if subscription.instruction is not Instruction.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
                log.warning("Skipping record due to null foreign key. topic=%s", self.context.record_metadata())
                return
        else:
            store = self.context.get_state_store(self.store_name)
            key = combined_key(record.key, subscription.primary_key)
            if subscription.instruction in (Instruction.DELETE_KEY_AND_PROPAGATE,
                                            Instruction.DELETE_KEY_NO_PROPAGATE):
                store.delete(key, record.timestamp)
            else:
                store.put(key, record.value, record.timestamp)
        self.context.forward(record.with_value(subscription))


class Response(NamedTuple):
    """A SubscriptionResponseWrapper on its way to the response topic: the answered subscription (its hash, and
    the partition of the left row the sink writes to) and the right row's bytes (None: no row); ``primary_keys``
    reads the subscription's primary key (for a TableJoined's partitioner, which partitions by the left table's
    key)."""

    subscription: Subscription
    foreign_value: bytes | None
    primary_keys: Serde

    def serialize(self) -> bytes:
        return serialize_response(self.subscription.hash, self.foreign_value)

    def primary_key(self) -> Any:
        return self.primary_keys.deserialize(self.subscription.primary_key)


class _Answering(Processor):
    """What the two answering processors share: the left table's key serde, for their Responses (resolved for
    the response topic; the default key serde when None)."""

    def __init__(self, primary_key_serde: Serde | None, topic: str) -> None:
        self.primary_key_serde, self.topic = primary_key_serde, topic

    def init(self, context: Any) -> None:
        super().init(context)
        self.primary_keys = _resolve(self.primary_key_serde, context.key_serde(), self.topic)


class SubscriptionJoin(_Answering):
    """The answer to a subscription (Kafka's SubscriptionJoinProcessorSupplier): the right row of its foreign key
    (``store_name``, the right table's store), timestamped with the later of the two."""

    def __init__(self, store_name: str, primary_key_serde: Serde | None, topic: str) -> None:
        super().__init__(primary_key_serde, topic)
        self.store_name = store_name

    def process(self, record: Record) -> None:
        subscription: Subscription = record.value
        instruction = subscription.instruction
        found = None
        right = self.context.get_state_store(self.store_name)
        if record.key is not None:
            found = right.get_with_timestamp(right.key_serde.deserialize(record.key))
        if instruction is Instruction.DELETE_KEY_NO_PROPAGATE or (
                instruction is Instruction.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE and found is None):
            return
        timestamp = record.timestamp if found is None else max(record.timestamp, found[1])
        foreign_value = (None if found is None or instruction is Instruction.DELETE_KEY_AND_PROPAGATE
                         else right.value_serde.serialize(found[0]))
        self.context.forward(Record(subscription.primary_key,
                                    Response(subscription, foreign_value, self.primary_keys), timestamp,
                                    record.headers))


class ForeignTableJoin(_Answering):
    """An update of the right table answers every subscriber of its key (Kafka's ForeignTableJoinProcessorSupplier),
    found by a prefix scan of the subscription store."""

    def __init__(self, store_name: str, key_serde: Serde | None, value_serde: Serde | None,
                 primary_key_serde: Serde | None, topic: str) -> None:
        """``key_serde``, ``value_serde``: the right table's (default serdes when None)."""
        super().__init__(primary_key_serde, topic)
        self.store_name, self.serdes = store_name, (key_serde, value_serde)

    def init(self, context: Any) -> None:
        super().init(context)
        self.keys = _resolve(self.serdes[0], context.key_serde(), self.topic)
        self.values = _resolve(self.serdes[1], context.value_serde(), self.topic)

    def process(self, record: Record) -> None:
        if record.key is None:
            log.warning("Skipping record due to null key. topic=%s", self.context.record_metadata())
            return
        foreign_key = self.keys.serialize(record.key)
        new = record.value.new_value
        foreign_value = None if new is None else self.values.serialize(new)
        store = self.context.get_state_store(self.store_name)
        for _, value in store.prefix_scan(_INT.pack(len(foreign_key)) + foreign_key):
            subscription = Subscription.deserialize(value)
            self.context.forward(Record(subscription.primary_key,
                                        Response(subscription, foreign_value, self.primary_keys),
                                        record.timestamp, record.headers))


class ResponseJoin(Processor):
    """The left side's receipt of an answer (Kafka's ResponseJoinProcessorSupplier): joined with the row's current
    value (``store_name``, the left table's store) unless its hash is not that value's (a stale answer, for a value
    since replaced, is dropped); an answer without a right row gives a tombstone in an inner join (and in a left
    join for a deleted row), else joiner(left value, right value or None)."""

    def __init__(self, store_name: str, joiner: Callable[[Any, Any], Any], left_join: bool,
                 right_value_serde: Serde | None) -> None:
        self.store_name, self.joiner, self.left_join = store_name, joiner, left_join
        self.right_value_serde = right_value_serde

    def process(self, record: Record) -> None:
        hash_, foreign_value = deserialize_response(record.value)
        store = self.context.get_state_store(self.store_name)
        key = store.key_serde.deserialize(record.key)
        found = store.get_with_timestamp(key)
        current = None if found is None else murmur3_hash128(store.value_serde.serialize(found[0]))
        if current != hash_:
            log.debug("Dropping FK-join response due to hash mismatch. Expected %s. Actual %s", hash_, current)
            return
        if foreign_value is None and (not self.left_join or found is None):
            result = None
        else:
            right_values = self.right_value_serde or self.context.value_serde()
            result = self.joiner(None if found is None else found[0],
                                 None if foreign_value is None else right_values.deserialize(foreign_value))
        self.context.forward(Record(key, Change(result), record.timestamp, record.headers))
