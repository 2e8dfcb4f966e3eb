"""The share coordinator (KIP-932): share groups' durable state in __share_group_state."""
