"""TransactionIndex: the `.txnindex` file of aborted transactions in a segment (READ_COMMITTED fetches use it).

Each entry (Kafka's AbortedTxn, 34 bytes, big-endian): version int16 (0), producer_id int64, first_offset int64,
last_offset int64 (the offset of the ABORT marker) and last_stable_offset int64 (the LSO when the abort was written).
Entries are appended in last_offset order. Like Kafka, the file is created only when the first aborted transaction
is appended, so most segments have none.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

from kfk.storage.index import CorruptIndexError

ABORTED_TXN_VERSION = 0
_ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_SIZE = _ABORTED_TXN.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return _ABORTED_TXN.pack(ABORTED_TXN_VERSION, *self)


class TxnIndexSearchResult(NamedTuple):
    aborted_transactions: list[AbortedTxn]
    is_complete: bool


class TransactionIndex:
    def __init__(self, base_offset: int, path: str) -> None:
        self.base_offset = base_offset
        self.path = path
        self._last_offset: int | None = None
        self._fd = -1
        #: The file was found missing and this index has not written it since: a segment without aborted
        #: transactions (most of them) has no file, and READ COMMITTED fetches ask every time.
        self._missing = False

    def _open(self, create: bool) -> bool:
        if self._fd >= 0:
            return True
        if not create and (self._missing or not os.path.exists(self.path)):
            return False
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        self._missing = False
        return True

    def append(self, aborted_txn: AbortedTxn) -> None:
        if self._last_offset is None:
            entries = self.all_aborted_txns()
            self._last_offset = entries[-1].last_offset if entries else None
        if self._last_offset is not None and self._last_offset >= aborted_txn.last_offset:
            raise ValueError(
                f"The last offset of appended transactions must increase sequentially, but {aborted_txn.last_offset} "
                f"is not greater than current last offset {self._last_offset} of index {self.path}"
            )
        self._open(create=True)
        position = os.fstat(self._fd).st_size
        os.pwrite(self._fd, aborted_txn.to_bytes(), position)
        self._last_offset = aborted_txn.last_offset

    def _read_all(self) -> bytes:
        """The whole file. Reading does not keep a descriptor (only appends do, until flushed and closed): READ
        COMMITTED fetches and the cleaner read the indexes of many old segments."""
        if self._fd >= 0:
            return os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        if self._missing:
            return b""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            self._missing = True
            return b""
        try:
            return os.pread(fd, os.fstat(fd).st_size, 0)
        finally:
            os.close(fd)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        data = self._read_all()
        whole = len(data) - len(data) % ABORTED_TXN_SIZE
        return [AbortedTxn(*fields[1:]) for fields in _ABORTED_TXN.iter_unpack(data[:whole])]

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset); complete when an entry's LSO
        already passes the upper bound (no later segment can hold one that overlaps)."""
        found: list[AbortedTxn] = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return TxnIndexSearchResult(found, True)
        return TxnIndexSearchResult(found, False)

    def truncate_to(self, offset: int) -> None:
        """Remove the entries whose last offset is >= `offset`."""
        entries = self.all_aborted_txns()
        keep = 0
        for txn in entries:
            if txn.last_offset >= offset:
                break
            keep += 1
        if self._open(create=False):
            os.ftruncate(self._fd, keep * ABORTED_TXN_SIZE)
        self._last_offset = entries[keep - 1].last_offset if keep else None

    def reset(self) -> None:
        if self._open(create=False):
            os.ftruncate(self._fd, 0)
        self._last_offset = None

    def sanity_check(self) -> None:
        data = self._read_all()
        if len(data) % ABORTED_TXN_SIZE:
            raise CorruptIndexError(
                f"Transaction index file {self.path} is corrupt: {len(data)} bytes is not a multiple of "
                f"{ABORTED_TXN_SIZE}"
            )
        for fields in _ABORTED_TXN.iter_unpack(data):
            version, _, _, last_offset, _ = fields
            if version != ABORTED_TXN_VERSION or last_offset < self.base_offset:
                raise CorruptIndexError(
                    f"Last offset of aborted transaction {AbortedTxn(*fields[1:])} in index {self.path} is less "
                    f"than start offset {self.base_offset} or its version {version} is unknown"
                )

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, new_path: str) -> None:
        try:
            os.replace(self.path, new_path)
        except FileNotFoundError:
            self._missing = True
        else:
            self._missing = False
        self.path = new_path

    def delete_if_exists(self) -> bool:
        self.close()
        self._missing = True
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False
