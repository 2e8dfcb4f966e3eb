"""How the data-path handlers reach the replica manager.

The listeners are bound before the replica manager starts (their ports are what the broker registers), so a client
that reconnects fast to a restarting broker can send a produce or fetch in between. Such a request is refused by
closing the connection: every client treats that as a transient failure, reconnects and retries.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kfk.server.dispatch import CloseConnection

if TYPE_CHECKING:
    from kfk.replication.replica_manager import ReplicaManager
    from kfk.server.broker import BrokerServer


def replica_manager_of(broker: BrokerServer) -> ReplicaManager:
    manager = getattr(broker, "replica_manager", None)
    if manager is None:
        raise CloseConnection("the replica manager is not started yet")
    return manager
