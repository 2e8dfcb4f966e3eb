"""Share sessions (KIP-932): like fetch sessions, a share consumer names its partitions once and then only the changes;
a session is one member's of one group, on one broker.

Epoch 0 opens a session (replacing the member's old one); each following ShareFetch or ShareAcknowledge sends the
session's next epoch (1, 2, ... wrapping to 1 after INT32_MAX); epoch -1 is the member's last request: its
acknowledgements are applied, then the session closes and what the member still holds is released. A session that
does not exist is SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH. ShareAcknowledge cannot open
a session (epoch 0 is INVALID_SHARE_SESSION_EPOCH for it). A session also ends when the connection that opened it
closes (as Kafka's share session cache does on a client's disconnect): a member killed while it holds records gives
them back at once, not only when their acquisition locks expire.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from kfk.common.constants import INT32_MAX
from kfk.errors import ErrorCode

INITIAL_EPOCH, FINAL_EPOCH = 0, -1

#: A share session's partition: (topic id, partition index).
SharePartitionKey = tuple[uuid.UUID, int]
#: A client's connection: (listener name, client host, client port).
ConnectionKey = tuple[str, str, int]


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch its next request must carry
    partitions: dict[SharePartitionKey, None] = field(default_factory=dict)  # ordered set
    connection: ConnectionKey | None = None  # the one that opened it


class ShareSessionCache:
    """The broker's share sessions, at most group.share.max.share.sessions of them: a new one beyond that is
    SHARE_SESSION_LIMIT_REACHED (a member reopening its own replaces it and does not count twice), so clients that
    open sessions and never close them cannot grow the broker without bound."""

    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        #: The sessions each connection opened, by (group id, member id): every closed connection is looked up,
        #: so this costs a dictionary lookup, not a pass over every session.
        self._by_connection: dict[ConnectionKey, set[tuple[str, str]]] = {}

    def open_or_advance(self, group_id: str, member_id: str, epoch: int, may_open: bool,
                        connection: ConnectionKey | None = None) -> tuple[ErrorCode, ShareSession | None]:
        """The session a request with `epoch` continues (or opens on `connection`, with epoch 0 when `may_open`),
        its next epoch counted; a FINAL request gets its session, which the caller closes once its
        acknowledgements are in."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if not may_open:
                return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
            replaced = self.sessions.get(key)
            if replaced is not None:
                self._forget_connection(replaced)
            elif len(self.sessions) >= self.max_sessions:
                return ErrorCode.SHARE_SESSION_LIMIT_REACHED, None
            session = self.sessions[key] = ShareSession(group_id, member_id, connection=connection)
            if connection is not None:
                self._by_connection.setdefault(connection, set()).add(key)
            return ErrorCode.NONE, session
        session = self.sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch == FINAL_EPOCH:
            return ErrorCode.NONE, session
        if epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        session.epoch = 1 if epoch == INT32_MAX else epoch + 1
        return ErrorCode.NONE, session

    def close(self, session: ShareSession) -> bool:
        """End `session`; False if it had already ended (or its member has opened another since)."""
        key = (session.group_id, session.member_id)
        if self.sessions.get(key) is not session:
            return False
        del self.sessions[key]
        self._forget_connection(session)
        return True

    def _forget_connection(self, session: ShareSession) -> None:
        if session.connection is None:
            return
        keys = self._by_connection.get(session.connection)
        if keys is not None:
            keys.discard((session.group_id, session.member_id))
            if not keys:
                del self._by_connection[session.connection]

    def opened_on(self, connection: ConnectionKey) -> list[ShareSession]:
        """The sessions `connection` opened (and no later request reopened on another)."""
        return [self.sessions[key] for key in self._by_connection.get(connection, ())]
