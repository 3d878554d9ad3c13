"""The group coordinator server: state machines, the asyncio server, and the CLI."""
