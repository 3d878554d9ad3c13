"""Names for kafka-python's objects, which the type checker cannot see into.

kafka-python 3.x builds its Request/Response classes from Kafka's JSON message schemas when it is
imported, and ships no type information (pyproject.toml's mypy section ignores its imports), so
to mypy every one of its values is ``Any``. These aliases are still ``Any``, but they say at each
use which kafka-python object is meant and why it is untyped: a bare ``Any`` left in the code is
one that must justify itself.
"""

from __future__ import annotations

from typing import Any, TypeAlias

__all__ = ["KafkaRequest", "KafkaResponse", "KafkaStruct", "KafkaMessageClass", "KafkaSchemaField",
           "KafkaCodegen"]

#: A decoded request: an instance of one of kafka-python's generated ``...Request`` classes.
KafkaRequest: TypeAlias = Any
#: A response to encode: an instance of one of kafka-python's generated ``...Response`` classes.
KafkaResponse: TypeAlias = Any
#: A nested struct of a request or response (a topic, a partition, a member entry, ...).
KafkaStruct: TypeAlias = Any
#: A generated message class itself (``OffsetCommitRequest``, ``ApiVersionsResponse``, ...).
KafkaMessageClass: TypeAlias = Any
#: A field of a generated message schema (``kafka.protocol.schemas.fields``), read by our codec.
KafkaSchemaField: TypeAlias = Any
#: kafka-python's code-generation context for compiled decoders (``CodegenContext``).
KafkaCodegen: TypeAlias = Any
