"""The request handlers: one module per API group, one small class per module.

A handler decodes nothing itself (dispatch did), calls the layer that owns the work, and builds the response. Its
class is constructed with exactly the objects it uses (the replica manager, the metadata cache, the controller, a
coordinator, the config values it reads, the node id), never the whole BrokerServer: no module here imports
kfk.server.broker, and a test builds a handler from real components without starting a broker. Each module opens
with what differs between the versions it serves; the version ranges themselves live in one table,
SERVED_VERSIONS in kfk/server/dispatch.py, which ApiVersions answers from.

To add an API (say EndTxn, key 26):

1. Add its row to SERVED_VERSIONS in kfk/server/dispatch.py, e.g. `ApiKey.END_TXN: VersionRange(0, 4),`: up to
   the highest stable version of the vendored schemas (kfk.protocol.apis.SUPPORTED_VERSIONS has them).
2. Write the handler in the module of its group (a new one, e.g. transactions.py, or an existing one), with a
   docstring that says what each version changes::

       class TransactionsHandler:
           def __init__(self, transaction_coordinator: TransactionCoordinator) -> None:
               self.transaction_coordinator = transaction_coordinator

           def register(self, dispatcher: Dispatcher) -> None:
               dispatcher.register(ApiKey.END_TXN, self.end_txn)

           async def end_txn(self, context: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
               ...  # context.api_version is within the table's range

   A method of an existing handler class can take a new dependency through its constructor the same way.
3. Construct it in BrokerServer._register_handlers (kfk/server/broker.py, the composition root) with the layers it
   needs. The broker refuses to start while a row of SERVED_VERSIONS has no handler, and the dispatcher refuses an
   API without a row.
4. When the handler would reach through one object into another (`a.b(x).c.d`), give the owning layer a method
   instead (e.g. ReplicaManager.compression_type(topic_partition)).

Tests build the class with real components (tests/replication/test_handlers.py: a Dispatcher, the handler objects
over a real ReplicaManager, real request frames) and broker processes in tests/integration.
"""
