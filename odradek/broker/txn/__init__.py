"""The transaction coordinator (Kafka's KIP-98): ``__transaction_state``, producer epochs,
two-phase commit with transaction markers. The protocol is described in ``transaction_state.py``."""
