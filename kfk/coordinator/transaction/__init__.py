"""The transaction coordinator: transactional ids, their producer ids and epochs, and two-phase commit over
__transaction_state (same shape as kfk.coordinator.group: a state machine and a thin asyncio service)."""
