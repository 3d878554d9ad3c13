"""Round trips for every API and every version in ``SUPPORTED_VERSIONS``.

Requests: a kafka-python request with non-default values in every field of that version is
encoded, framed with the request header of the right version (v1, or v2 for flexible versions),
fed to :class:`ServerConnection`, and must come out equal (and re-encode to the same bytes).

Responses: ``encode_response`` output, stripped of its size and response header (v0, or v1 for
flexible versions except ApiVersions), must decode with kafka-python back to the original; and
kafka-python's own client-side reader (``header=True, framed=True``) must agree on the header.

Field values come from the message schemas themselves (every field, nested structs and tagged
fields included), so an API added to the table is covered without touching this file.
"""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs import (
    UUID,
    BitField,
    Boolean,
    Bytes,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    String,
    UnsignedInt16,
)
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField

from protocol.apis import SUPPORTED_VERSIONS, ApiKey, is_flexible, request_class, response_class
from protocol.connection import ServerConnection, encode_response
from protocol.events import NEED_DATA, RequestReceived
from tests.protocol.test_connection import request_frame

SERVED = [
    (key, version)
    for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    for version in range(low, high + 1)
]
IDS = [f"{key.name}-v{version}" for key, version in SERVED]

# --------------------------------------------------------------------------------------------
# Representative values from the schema
# --------------------------------------------------------------------------------------------


def _simple_value(field: SimpleField, salt: int) -> Any:
    """A value of the field's type that differs from its schema default."""
    kind = field._type
    if kind is Boolean:
        return not field.default
    if kind is Int8:
        return 7 + salt if field.default != 7 + salt else 8 + salt
    if kind is Int16:
        return 300 + salt
    if kind is UnsignedInt16:
        return 40000 + salt
    if kind is Int32:
        return 70000 + salt
    if kind is Int64:
        return 2**40 + salt
    if kind is Float64:
        return 2.5 + salt
    if kind is UUID:
        return uuid.UUID(int=0x5EED_0000 + salt)
    if kind is Bytes:
        return bytes([1, 2, 3, salt % 256])
    if kind is BitField:
        return {1, 3 + salt % 4}
    if isinstance(kind, String):
        return f"{field.name}-é-{salt}"
    raise TypeError(f"no representative value for {field!r}")


def _value(field: Any, version: int, salt: int, nulls: bool) -> Any:
    if nulls and field.nullable_for_version_q(version):
        return None
    if isinstance(field, StructArrayField):
        return [_struct(field.array_of, version, salt + i, nulls) for i in range(2)]
    if isinstance(field, ArrayField):
        return [_simple_value(field.array_of, salt + i) for i in range(2)]
    if isinstance(field, StructField):
        return _struct(field, version, salt, nulls)
    return _simple_value(field, salt)


def _struct(struct_field: StructField, version: int, salt: int, nulls: bool) -> Any:
    values = {f.name: _value(f, version, salt, nulls)
              for f in struct_field._fields if f.for_version_q(version)}
    return struct_field.data_class(**values)


def representative(cls: Any, version: int, *, nulls: bool = False) -> Any:
    """A message of ``cls`` at ``version`` with a non-default value in every field.

    With ``nulls=True`` every field nullable in that version is null instead.
    """
    values = {f.name: _value(f, version, 1, nulls)
              for f in cls._struct._fields if f.for_version_q(version)}
    if cls.__name__ == "ApiVersionsResponse":
        # A non-zero error makes every reader (kafka-python included) fall back to the v0 body
        # (KIP-511), so a v1+ round trip only makes sense without an error.
        values["error_code"] = 0
    return cls[version](**values)


# --------------------------------------------------------------------------------------------
# Hypothesis strategies from the schema
# --------------------------------------------------------------------------------------------

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=12)


def _simple_strategy(field: SimpleField) -> st.SearchStrategy[Any]:
    kind = field._type
    if kind is Boolean:
        return st.booleans()
    if kind is Int8:
        return st.integers(-(2**7), 2**7 - 1)
    if kind is Int16:
        return st.integers(-(2**15), 2**15 - 1)
    if kind is UnsignedInt16:
        return st.integers(0, 2**16 - 1)
    if kind is Int32:
        return st.integers(-(2**31), 2**31 - 1)
    if kind is Int64:
        return st.integers(-(2**63), 2**63 - 1)
    if kind is Float64:
        return st.floats(allow_nan=False)
    if kind is UUID:
        return st.uuids()
    if kind is Bytes:
        return st.binary(max_size=16)
    if kind is BitField:
        return st.sets(st.integers(0, 30), max_size=4)
    if isinstance(kind, String):
        return _TEXT
    raise TypeError(f"no strategy for {field!r}")


def _strategy(field: Any, version: int) -> st.SearchStrategy[Any]:
    if isinstance(field, StructArrayField):
        base = st.lists(_struct_strategy(field.array_of, version), max_size=3)
    elif isinstance(field, ArrayField):
        base = st.lists(_simple_strategy(field.array_of), max_size=3)
    elif isinstance(field, StructField):
        base = _struct_strategy(field, version)
    else:
        base = _simple_strategy(field)
    if field.nullable_for_version_q(version):
        return st.none() | base
    return base


def _struct_strategy(struct_field: StructField, version: int) -> st.SearchStrategy[Any]:
    fields = {f.name: _strategy(f, version) for f in struct_field._fields if f.for_version_q(version)}
    return st.fixed_dictionaries(fields).map(lambda kw: struct_field.data_class(**kw))


def message_strategy(cls: Any, version: int) -> st.SearchStrategy[Any]:
    fields = {f.name: _strategy(f, version) for f in cls._struct._fields if f.for_version_q(version)}
    if cls.__name__ == "ApiVersionsResponse":
        fields["error_code"] = st.just(0)
    return st.fixed_dictionaries(fields).map(lambda kw: cls[version](**kw))


# --------------------------------------------------------------------------------------------
# Requests
# --------------------------------------------------------------------------------------------


def reencode(message: Any, version: int) -> bytes:
    """Encode a *decoded* kafka-python message again.

    kafka-python 3.0.12 leaves the ``_header`` slot unset on decoded messages, so their
    ``encode(version=...)`` raises AttributeError (and some classes, DeleteTopicsRequest for one,
    always pass the version). Setting the slot works around that.
    """
    try:
        message._header  # noqa: B018
    except AttributeError:
        message._header = None
    return bytes(message.encode(version=version))


def _through_connection(request: Any, api_key: ApiKey, version: int) -> RequestReceived:
    data = request_frame(request, version, 31337, "round-trip")
    conn = ServerConnection()
    conn.receive_data(data)
    event = conn.next_event()
    assert isinstance(event, RequestReceived), event
    assert (event.api_key, event.api_version, event.correlation_id, event.client_id) == (
        api_key, version, 31337, "round-trip")
    assert conn.next_event() is NEED_DATA
    return event


def test_every_served_api_is_covered() -> None:
    assert SERVED
    assert (ApiKey.API_VERSIONS, 4) in SERVED


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=IDS)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_request_round_trip(api_key: ApiKey, version: int, nulls: bool) -> None:
    cls = request_class(api_key)
    request = representative(cls, version, nulls=nulls)
    encoded = request.encode(version=version)
    event = _through_connection(request, api_key, version)
    assert event.request == request
    assert event.request.version == version
    assert reencode(event.request, version) == encoded


def _has_fields(cls: Any, version: int) -> bool:
    return any(f.for_version_q(version) for f in cls._struct._fields)


WITH_REQUEST_FIELDS = [(k, v) for k, v in SERVED if _has_fields(request_class(k), v)]


@pytest.mark.parametrize(("api_key", "version"), WITH_REQUEST_FIELDS,
                         ids=[f"{k.name}-v{v}" for k, v in WITH_REQUEST_FIELDS])
def test_request_values_are_not_defaults(api_key: ApiKey, version: int) -> None:
    """Guard for the test above: the representative request differs from a default one."""
    cls = request_class(api_key)
    assert representative(cls, version) != cls[version]()


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=IDS)
def test_response_values_are_not_defaults(api_key: ApiKey, version: int) -> None:
    cls = response_class(api_key)
    assert representative(cls, version) != cls[version]()


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=IDS)
def test_request_framed_by_kafka_python_client_code(api_key: ApiKey, version: int) -> None:
    """kafka-python's own client framing (its header version choice) is what we parse."""
    cls = request_class(api_key)
    request = representative(cls, version)
    request.with_header(correlation_id=99, client_id="kp")
    data = request.encode(version=version, header=True, framed=True)
    conn = ServerConnection()
    conn.receive_data(data)
    event = conn.next_event()
    assert isinstance(event, RequestReceived), event
    assert (event.correlation_id, event.client_id) == (99, "kp")
    assert event.request == representative(cls, version)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), target=st.sampled_from(SERVED))
def test_request_round_trip_fuzzed_values(data: st.DataObject, target: tuple[ApiKey, int]) -> None:
    api_key, version = target
    request = data.draw(message_strategy(request_class(api_key), version))
    event = _through_connection(request, api_key, version)
    assert event.request == request


# --------------------------------------------------------------------------------------------
# Responses
# --------------------------------------------------------------------------------------------


def _response_body(api_key: ApiKey, version: int, correlation_id: int, response: Any) -> bytes:
    data = encode_response(api_key, version, correlation_id, response)
    (size,) = struct.unpack_from(">i", data, 0)
    assert size == len(data) - 4
    assert struct.unpack_from(">i", data, 4)[0] == correlation_id
    if is_flexible(api_key, version) and api_key != ApiKey.API_VERSIONS:
        assert data[8] == 0, "response header v1 ends with an empty tagged-field section"
        return data[9:]
    return data[8:]


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=IDS)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_response_round_trip(api_key: ApiKey, version: int, nulls: bool) -> None:
    cls = response_class(api_key)
    response = representative(cls, version, nulls=nulls)
    body = _response_body(api_key, version, 424242, response)
    assert body == response.encode(version=version)
    decoded = cls.decode(body, version=version)
    assert decoded == response


@pytest.mark.parametrize(("api_key", "version"), SERVED, ids=IDS)
def test_response_read_by_kafka_python_client_code(api_key: ApiKey, version: int) -> None:
    """kafka-python's reader picks the response header version itself; it must agree with ours."""
    cls = response_class(api_key)
    response = representative(cls, version)
    data = encode_response(api_key, version, -17, response)
    decoded = cls.decode(data, version=version, header=True, framed=True)
    assert decoded.header.correlation_id == -17
    assert decoded == response


@pytest.mark.parametrize("version", range(SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1] + 1))
def test_api_versions_error_response_is_read_as_v0(version: int) -> None:
    """An UNSUPPORTED_VERSION answer is a v0 body; clients decode it as v0 whatever they asked."""
    cls = response_class(ApiKey.API_VERSIONS)
    response = cls[0](error_code=35, api_keys=[
        cls.ApiVersion(api_key=18, min_version=0, max_version=4),
        cls.ApiVersion(api_key=3, min_version=0, max_version=12),
    ])
    data = encode_response(ApiKey.API_VERSIONS, 0, 5, response)
    decoded = cls.decode(data, version=version, header=True, framed=True)
    assert decoded.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [
        (18, 0, 4), (3, 0, 12)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), target=st.sampled_from(SERVED),
       correlation_id=st.integers(-(2**31), 2**31 - 1))
def test_response_round_trip_fuzzed_values(
    data: st.DataObject, target: tuple[ApiKey, int], correlation_id: int
) -> None:
    api_key, version = target
    cls = response_class(api_key)
    response = data.draw(message_strategy(cls, version))
    body = _response_body(api_key, version, correlation_id, response)
    assert cls.decode(body, version=version) == response
