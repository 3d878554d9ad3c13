"""Sans-IO Kafka wire protocol: framing, headers, message codecs, record batches, error codes.

Nothing in this package performs I/O or imports asyncio: bytes in, typed values out, and back.
"""
