"""Backend-independent controller logic: replica placement, leader election, ISR changes, topic admin."""
