"""Room for the transaction coordinator (``__transaction_state``, markers, the LSO): a coordinator
wing shaped like ``group/`` (pure rules plus a ``service.py`` on the runtime). Empty until then;
its place in the import order is written in tests/test_layering.py."""
