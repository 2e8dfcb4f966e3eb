"""The controller's and leaders' writes: one ZooKeeper multi-op per change, all or nothing. Blocking (kazoo)."""

from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError, NotEmptyError, RolledBackError

from kfk.backends.zookeeper import znodes
from kfk.backends.zookeeper.translation import Operation
from kfk.errors import InvalidUpdateVersionError, NotControllerError, UnknownServerError


def commit(client: KazooClient, operations: list[Operation], node_id: int) -> list:
    """Commit `operations` as one multi-op. A failed version check on /controller_epoch raises NotControllerError
    (a newer controller was elected: `node_id`'s write is fenced); any other failed check or existence
    precondition InvalidUpdateVersionError (what was read changed meanwhile)."""
    transaction = client.transaction()
    for operation in operations:
        if operation.kind == "check":
            transaction.check(operation.path, operation.version)
        elif operation.kind == "create":
            transaction.create(operation.path, operation.data, sequence=operation.sequential)
        elif operation.kind == "set":
            transaction.set_data(operation.path, operation.data, version=operation.version)
        else:
            transaction.delete(operation.path, version=operation.version)
    try:
        results = transaction.commit()
    except KazooException as error:
        raise UnknownServerError(f"ZooKeeper multi-op failed: {error!r}") from error
    for operation, result in zip(operations, results):
        if not isinstance(result, Exception) or isinstance(result, RolledBackError):
            continue
        if operation.path == znodes.CONTROLLER_EPOCH_PATH:
            raise NotControllerError(f"The controller epoch moved on: broker {node_id} is no longer the controller")
        if isinstance(result, BadVersionError):
            raise InvalidUpdateVersionError(f"{operation.path} changed since it was read")
        if isinstance(result, (NodeExistsError, NoNodeError, NotEmptyError)):
            raise InvalidUpdateVersionError(f"{operation.kind} {operation.path}: {type(result).__name__}")
        raise UnknownServerError(f"ZooKeeper {operation.kind} {operation.path} failed: {result!r}")
    return results
