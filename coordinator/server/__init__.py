"""The asyncio edge: the only code that touches client sockets. It reads frames through the
sans-IO ``protocol.connection`` and dispatches requests to the handlers the app wires in; it imports
no other wing (docs/architecture.md)."""
