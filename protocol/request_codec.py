"""Decoding a request body: kafka-python's generated decoders, held to Kafka's rules.

kafka-python compiles one decoder per message and version from its schema (``emit_decode_from``
of each field) that reads with ``unpack_from`` and slices and checks no bounds of its own. Where
that falls short of what a server facing hostile clients needs was found by the frame and request
fuzz harnesses (``tests/fuzz/``, issue 22: the OverflowError of 2, the assert of 3) and by reading
the generated code while writing them (1, the quadratic copy of 3, and 4). We compile the decoders
ourselves, with the emitters of varints, tagged fields and arrays replaced, and check the end
position:

1. A string, bytes or tagged field whose length runs past the end of the body was cut short by the
   slice and the request accepted with a shortened value. Kafka's readers throw (a buffer
   underflow), and so do we: the decoder reports where it stopped, and a body it read past is
   malformed.
2. Unsigned varints (compact lengths, tag numbers, tag sizes) had no length limit, so garbage
   built integers too large to slice with (``OverflowError``). Kafka refuses a varint of more than
   5 bytes; so does ours (``protocol/varints.read_uvarint``).
3. Tagged fields were read by copying *the whole rest of the body* into a ``BytesIO`` for every
   struct that had any: a request of many small items each with a tag cost time quadratic in its
   size (a 1 MB Metadata request: over a second of the event loop). A known tagged field holding
   a struct with tags of its own failed an ``assert`` (and under ``python -O`` misread the rest).
   Ours reads each tagged field from its own declared bytes, and the field must fill them.
4. An int32 array length below -1 gave an empty array (``range`` of a negative count) where
   Kafka's readers see a null, refused for a non-nullable field; ours refuses it outright, and,
   as Kafka's generated readers do, refuses a count larger than the bytes left ("Tried to allocate
   a collection of size ..."), so no count sizes work beyond what the body could hold.
5. As Kafka 4.4's message readers do (apache/kafka docs/getting-started/upgrade.md, "Notable changes
   in 4.4"), an array of more than ``MAX_ARRAY_ELEMENTS`` (1,000,000) elements or a tagged-field
   section of more than ``MAX_TAGGED_FIELDS`` (10,000) fields is malformed, whatever the bytes
   left: the count is refused as soon as it is read, before any element is.
6. A compact string (flexible versions) may declare any length; Kafka's generated readers refuse
   one longer than ``MAX_STRING_BYTES`` (32,767, ``Short.MAX_VALUE``: "string field ... had
   invalid length"), the most a non-flexible string or a ``__consumer_offsets`` record key can
   hold. So do we: a group id, member id or SubscribedTopicRegex read from a request always fits
   the int16-length strings of the record keys written for it (a 40,000-byte regex once reached
   the ConsumerGroupRegularExpression key's encoder and failed the heartbeat's handler).

A decoder fails on garbage with whatever its reads raise: ``struct.error`` and ``IndexError`` past
the end, ``ValueError`` (a bad UUID, ``UnicodeDecodeError``, a ``VarintError``). Those are its "malformed" signals
and become :class:`MalformedRequest`; anything else is a bug and escapes (the connection still
closes on it, but the fuzz harness reports it).
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs.types import String, UnsignedVarInt32
from kafka.protocol.schemas.fields.codegen import CodegenContext
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField

from .kafka_types import KafkaCodegen, KafkaMessageClass, KafkaRequest, KafkaSchemaField
from .varints import read_uvarint

__all__ = ["MalformedRequest", "body_decoder", "CODEC_ERRORS", "MAX_ARRAY_ELEMENTS", "MAX_STRING_BYTES",
           "MAX_TAGGED_FIELDS", "too_many_tagged_fields"]

#: What the generated decoders raise for malformed input (see the module docstring).
CODEC_ERRORS = (struct.error, IndexError, ValueError)

#: The most elements an array of a request may hold, and the most fields a tagged-field section
#: may hold: Kafka 4.4's limits (rule 5 of the module docstring).
MAX_ARRAY_ELEMENTS = 1_000_000
MAX_TAGGED_FIELDS = 10_000
#: The longest string a request may hold (rule 6 of the module docstring).
MAX_STRING_BYTES = 0x7FFF


class MalformedRequest(ValueError):
    """A request body that does not decode under its api version's schema."""


# --- the emitters we replace --------------------------------------------------------------


def _emit_uvarint(cls: object, ctx: KafkaCodegen, var_name: str, indent: str) -> None:
    """An unsigned varint: a one-byte value (below 128: nearly every compact length, count and
    tag) read inline, anything longer by protocol/varints.read_uvarint, the one reader, which
    refuses more than 5 bytes as Kafka's ByteUtils does. The inline byte keeps a call per varint
    off the hot path: with a call for every varint, turning a 10-partition OffsetCommit v9 frame
    into its event took 12.7 instead of 9.7 us, a Heartbeat v4 4.2 instead of 3.5 us
    (ServerConnection, best of 7 x 20,000, 2026-11-27). The reader's VarintError is a ValueError,
    so a malformed request (rule 2)."""
    ctx.emit(indent, f"{var_name} = data[pos]")
    ctx.emit(indent, "pos += 1")
    ctx.emit(indent, f"if {var_name} >= 0x80:")
    ctx.emit(indent, f"    {var_name}, pos = _read_uvarint(data, pos - 1)")


def _emit_tagged_decode(self: KafkaSchemaField, ctx: KafkaCodegen, var_name: str, indent: str, version: int) -> None:
    """A non-empty tagged-field section, read by :func:`_read_tagged_fields`; the decoded fields
    land on the object as kafka-python's own decoder puts them (known ones as attributes)."""
    tagged = ctx.next_var("tf")
    ctx.globs[tagged] = self.tagged_fields(version)
    ctx.emit(indent, f"_tfd, pos = _read_tagged_fields({tagged}, data, pos, {version})")
    ctx.emit(indent, "for _tk, _tv in _tfd.items():")
    ctx.emit(indent, "    if _tk.startswith('_'):")
    ctx.emit(indent, f"        if {var_name}.unknown_tags is None: {var_name}.unknown_tags = {{}}")
    ctx.emit(indent, f"        {var_name}.unknown_tags[_tk] = _tv")
    ctx.emit(indent, "    else:")
    ctx.emit(indent, f"        if {var_name}.tags is None: {var_name}.tags = set()")
    ctx.emit(indent, f"        {var_name}.tags.add(_tk)")
    ctx.emit(indent, f"        setattr({var_name}, _tk, _tv)")


def _emit_array_decode(self: KafkaSchemaField, ctx: KafkaCodegen, var_name: str, indent: str, version: int | None = None,
                       compact: bool = False, tagged: bool | None = False) -> None:
    """An array (of values or of structs: both classes keep the item field in ``array_of``):
    -1 is null, any other negative count or one larger than the bytes left is malformed."""
    n = ctx.next_var("n")
    if compact:
        _emit_uvarint(None, ctx, n, indent)
        ctx.emit(indent, f"{n} -= 1")
    else:
        ctx.emit(indent, f"{n} = unpack_from('>i', data, pos)[0]")
        ctx.emit(indent, "pos += 4")
    ctx.emit(indent, f"if {n} == -1:")
    ctx.emit(indent, f"    {var_name} = None")
    ctx.emit(indent, "else:")
    inner = indent + "    "
    # One comparison more than the bytes-left check for Kafka 4.4's limit, the constant inlined.
    ctx.emit(inner, f"if {n} > len(data) - pos or {n} < -1 or {n} > {MAX_ARRAY_ELEMENTS}:")
    ctx.emit(inner, f"    raise _MalformedRequest(_array_count_error({n}, len(data) - pos))")
    ctx.emit(inner, f"{var_name} = []")
    item = ctx.next_var("item")
    ctx.emit(inner, f"for _ in range({n}):")
    self.array_of.emit_decode_from(ctx, item, inner + "    ", version=version, compact=compact, tagged=tagged)
    ctx.emit(inner, f"    {var_name}.append({item})")


def _emit_string_decode(self: object, ctx: KafkaCodegen, var_name: str, indent: str, compact: bool = False) -> None:
    """A string: as kafka-python reads it, but a compact one longer than ``MAX_STRING_BYTES``
    is malformed (rule 6; a non-flexible one has an int16 length and cannot be). One comparison,
    on the non-null branch only."""
    ln = ctx.next_var("ln")
    if compact:
        _emit_uvarint(None, ctx, ln, indent)
        ctx.emit(indent, f"{ln} -= 1")
    else:
        ctx.emit(indent, f'{ln} = unpack_from(">h", data, pos)[0]')
        ctx.emit(indent, "pos += 2")
    ctx.emit(indent, f"if {ln} < 0:")
    ctx.emit(indent, f"    {var_name} = None")
    if compact:
        ctx.emit(indent, f"elif {ln} > {MAX_STRING_BYTES}:")
        ctx.emit(indent, f"    raise _MalformedRequest(f'string of {{{ln}}} bytes, more than the {MAX_STRING_BYTES}"
                         " a request may hold')")
    ctx.emit(indent, "else:")
    ctx.emit(indent, f'    {var_name} = str(data[pos:pos+{ln}], "utf-8")')
    ctx.emit(indent, f"    pos += {ln}")


def _array_count_error(count: int, left: int) -> str:
    """Why an array count is refused: Kafka 4.4's limit first, so that a count past it is refused
    for that reason whether or not the body holds its elements."""
    if count > MAX_ARRAY_ELEMENTS:
        return f"array of {count} elements, more than the {MAX_ARRAY_ELEMENTS} a request may hold"
    return f"array of {count} items with {left} bytes left"


def too_many_tagged_fields(count: int) -> MalformedRequest:
    """The error for a tagged-field section of ``count`` > ``MAX_TAGGED_FIELDS`` fields (rule 5); the
    callers compare inline, so a section within the limit costs one comparison."""
    return MalformedRequest(f"{count} tagged fields, more than the {MAX_TAGGED_FIELDS} a request may hold")


def _read_tagged_fields(tagged: KafkaSchemaField, data: memoryview, pos: int, version: int) -> tuple[dict[str, object], int]:
    """``{name or "_<tag>": value}`` of the section at ``pos``, and the position after it."""
    count, pos = read_uvarint(data, pos)
    if count > MAX_TAGGED_FIELDS:
        raise too_many_tagged_fields(count)
    fields: dict[str, object] = {}
    for _ in range(count):
        tag, pos = read_uvarint(data, pos)
        size, pos = read_uvarint(data, pos)
        end = pos + size
        if end > len(data):
            raise MalformedRequest(f"tagged field {tag} of {size} bytes runs past the end of the body")
        field = tagged._tags.get(tag)
        if field is None:
            fields[f"_{tag}"] = bytes(data[pos:end])
        else:
            raw = io.BytesIO(data[pos:end])  # only this field's bytes: it cannot read past them
            try:
                fields[field.name] = field.decode(raw, version=version, compact=True, tagged=None)
            except AssertionError:
                # kafka-python asserts that a struct inside a tagged field has no tags of its own.
                raise MalformedRequest(f"tagged field {tag} holds a struct with tagged fields") from None
            if raw.tell() != size:
                raise MalformedRequest(f"tagged field {tag} declares {size} bytes but its value takes {raw.tell()}")
        pos = end
    return fields, pos


# --- compiling --------------------------------------------------------------------------------

#: kafka-python's own emitters, put back after each of our compilations.
_THEIR_VARINT = UnsignedVarInt32.__dict__["emit_decode_from"]
_THEIR_TAGGED = StructField.__dict__["_emit_tagged_decode"]
_THEIR_ARRAY = ArrayField.__dict__["emit_decode_from"]
_THEIR_STRUCT_ARRAY = StructArrayField.__dict__["emit_decode_from"]
_THEIR_STRING = String.__dict__["emit_decode_from"]


@contextmanager
def _our_emitters() -> Iterator[None]:
    """Swap our emitters in while one decoder is generated: only code generation runs in this
    window, no decoding. protocol/ has no threads; the server compiles from its event loop."""
    UnsignedVarInt32.emit_decode_from = classmethod(_emit_uvarint)
    StructField._emit_tagged_decode = _emit_tagged_decode
    # StructArrayField overrides emit_decode_from too: both are swapped, and both put back.
    ArrayField.emit_decode_from = StructArrayField.emit_decode_from = _emit_array_decode
    String.emit_decode_from = _emit_string_decode
    try:
        yield
    finally:
        UnsignedVarInt32.emit_decode_from = _THEIR_VARINT
        StructField._emit_tagged_decode = _THEIR_TAGGED
        ArrayField.emit_decode_from = _THEIR_ARRAY
        StructArrayField.emit_decode_from = _THEIR_STRUCT_ARRAY
        String.emit_decode_from = _THEIR_STRING


def _compile(cls: KafkaMessageClass, version: int) -> Callable[[bytes | memoryview, int], tuple[KafkaRequest, int]]:
    """``decode(data, pos) -> (message, end)`` for ``cls`` at ``version``: what kafka-python's
    ``compiled_decode_from`` builds (same classes, same objects), with our emitters."""
    schema = cls._struct
    flexible = bool(cls.flexible_version_q(version))
    ctx = CodegenContext()
    ctx.globs["_read_tagged_fields"] = _read_tagged_fields
    ctx.globs["_MalformedRequest"] = MalformedRequest
    ctx.globs["_array_count_error"] = _array_count_error
    ctx.globs["_read_uvarint"] = read_uvarint
    ctx.lines.append("def _decode(data, pos):")
    with _our_emitters():
        # The top-level object is the api's primary class, as in kafka-python's ``decode``.
        saved, schema._data_class = schema._data_class, cls[None]
        try:
            schema.emit_decode_from(ctx, "obj", "    ", version=version, compact=flexible, tagged=flexible)
        finally:
            schema._data_class = saved
    ctx.emit("    ", "return obj, pos")
    exec(compile(ctx.source(), f"<codegen_decode:{schema.name}_v{version}:groupcoord>", "exec"), ctx.globs)
    decode: Callable[[bytes | memoryview, int], tuple[KafkaRequest, int]] = ctx.globs["_decode"]
    return decode


def body_decoder(cls: KafkaMessageClass, version: int) -> Callable[[bytes | memoryview], KafkaRequest]:
    """A function decoding a ``cls`` request body of ``version`` or raising MalformedRequest."""
    decode_from = _compile(cls, version)

    def decode(body: bytes | memoryview) -> KafkaRequest:
        try:
            message, end = decode_from(body, 0)
        except CODEC_ERRORS as exc:
            raise MalformedRequest(f"{type(exc).__name__}: {exc}") from None
        if end > len(body):
            raise MalformedRequest(f"a field runs {end - len(body)} bytes past the end of the {len(body)}-byte body")
        return message

    return decode
