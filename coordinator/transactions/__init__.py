"""Kafka's transaction coordinator (KIP-98) on ``__transaction_state``: the rules as pure state
machines (no asyncio, no sockets, no files, no clock), and ``service.py``, the adapter between the
wire and the runtime — a second coordinator type on the one runtime, shaped like ``group/``.

* ``state.py`` — the states, their byte ids and names, and the valid transitions;
* ``metadata.py`` — one transactional id's metadata, and its record form;
* ``shard.py`` — the shard of one ``__transaction_state`` partition: every handler returns its
  records first (``CoordinatorResult``), ``replay`` applies them, loading is replaying;
* ``timers.py`` — the timeout abort and the id expiration;
* ``markers.py`` — the ``MarkerWriter`` seam (C2, docs/transactions.md) and what a decided transaction hands to it;
* ``marker_channel.py`` — sending a decided transaction's markers, with Kafka's retry rules;
* ``coordinator_type.py`` — the coordinator type (topic, shard builder, serde);
* ``service.py`` — the wire APIs routed to the shards on the runtime.
"""
