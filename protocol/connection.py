"""The server side of one Kafka connection, without I/O: bytes in, events out; responses in, bytes out.

Wire format (Kafka protocol guide, "Requests and responses")::

    Frame          => Size:int32 Payload
    RequestHeader  => api_key:int16 api_version:int16 correlation_id:int32 client_id:nullable_string
                      [tagged_fields]                       (v2: only for flexible api versions)
    ResponseHeader => correlation_id:int32 [tagged_fields]  (v1: only for flexible api versions,
                                                             never for ApiVersions)

The client id stays a classic int16-length string even in header v2, so older brokers can read it.

Rules:

1. ``receive_data`` only buffers; ``next_event`` does the parsing. Any split of the byte stream,
   one byte at a time included, yields the same events.
2. A size prefix that is negative or above ``max_request_size`` is a violation as soon as its four
   bytes arrive: we never allocate or wait for a frame we would refuse.
3. After a :class:`ProtocolViolation` the connection is dead and yields that violation forever:
   a stream that lost framing cannot be resynchronised.
4. Before authentication (SASL listeners) the server narrows the stream: ``admit`` sees each
   request's api key and version from its header *before the body is parsed* and may refuse it
   (a violation: Kafka closes such a connection without answering); ``frame_limit`` caps frame
   sizes below ``max_request_size`` (``sasl.server.max.receive.size``); ``raw_next`` makes the next
   frame a :class:`RawFrame`, a SASL token without a Kafka header (SaslHandshake v0; Kafka
   protocol guide, "SASL Authentication Sequence").
5. The connection knows nothing of handlers. An unknown api key or an unsupported version is a
   violation (Kafka closes such connections too), except ApiVersions above our maximum, which has
   its own event so it can be answered in the v0 format (KIP-511).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from .apis import SUPPORTED_VERSIONS, ApiKey, request_class, response_class
from .events import NEED_DATA, ProtocolViolation, RequestReceived, UnsupportedApiVersions
from .kafka_types import KafkaRequest, KafkaResponse
from .nullability import null_checker
from .request_codec import MAX_TAGGED_FIELDS, MalformedRequest, body_decoder, too_many_tagged_fields
from .varints import VarintError, read_uvarint

__all__ = ["ServerConnection", "DEFAULT_MAX_REQUEST_SIZE", "encode_response", "RawFrame", "Admission"]

#: Kafka's ``socket.request.max.bytes`` default (100 MiB): the largest request frame accepted.
DEFAULT_MAX_REQUEST_SIZE = 104857600

_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_SIZE = struct.Struct(">i")


class RawFrame:
    """A frame read without a Kafka header: a SASL token of the v0 exchange."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


Event = RequestReceived | UnsupportedApiVersions | ProtocolViolation | RawFrame

#: Sees (api key, api version) of each request header before its body is parsed; a reason string
#: refuses the request (the connection then fails with it), None lets it through.
Admission = Callable[[int, int], "str | None"]


def _skip_tagged_fields(buf: memoryview, pos: int) -> int:
    """Skip a tagged-field section (KIP-482): count, then (tag, size, bytes) per field."""
    try:
        count, pos = read_uvarint(buf, pos)
        if count > MAX_TAGGED_FIELDS:  # the header's tagged fields are held to Kafka 4.4's limit too
            raise too_many_tagged_fields(count)
        for _ in range(count):
            _tag, pos = read_uvarint(buf, pos)
            size, pos = read_uvarint(buf, pos)
            pos += size
            if pos > len(buf):
                raise MalformedRequest("tagged field runs past the end of the frame")
    except VarintError as exc:
        raise MalformedRequest(str(exc)) from None
    return pos


#: (api key, version) -> whether its response header is v1; filled on first use (hot path).
_RESPONSE_HEADER_V1: dict[tuple[int, int], bool] = {}
#: (api key, version) of a supported request -> (ApiKey, body decoder, flexible header, null check).
_REQUEST_PLANS: dict[tuple[int, int], tuple[ApiKey, Callable[[bytes | memoryview], KafkaRequest], bool,
                                                 Callable[[KafkaRequest], None]]] = {}
#: The same for each other versions table a server serves (``ServerConnection.serve_versions``): a plan made for
#: one table must not admit a version another table refuses.
_PLANS_BY_TABLE: dict[int, dict[tuple[int, int], tuple[ApiKey, Callable[[bytes | memoryview], KafkaRequest], bool,
                                                        Callable[[KafkaRequest], None]]]] = {}
_CORRELATION = struct.Struct(">i")
_CORRELATION_V1 = struct.Struct(">ib")


def encode_response(api_key: int, api_version: int, correlation_id: int, response: KafkaResponse) -> bytes:
    """Frame ``response`` (a kafka-python response message) for the given request."""
    body = response.encode(version=api_version)
    v1 = _RESPONSE_HEADER_V1.get((api_key, api_version))
    if v1 is None:
        # ApiVersions responses always use header v0, whatever the version (KIP-511), because
        # the client reads them before it knows which versions the server speaks.
        v1 = _RESPONSE_HEADER_V1[(api_key, api_version)] = bool(
            response_class(api_key).flexible_version_q(api_version)) and api_key != ApiKey.API_VERSIONS
    if v1:
        header = _CORRELATION_V1.pack(correlation_id, 0)  # header v1: empty tagged fields
    else:
        header = _CORRELATION.pack(correlation_id)
    return b"".join((_SIZE.pack(len(header) + len(body)), header, body))


class ServerConnection:
    """Protocol state of one client connection. Not thread-safe; one per socket."""

    def __init__(self, max_request_size: int = DEFAULT_MAX_REQUEST_SIZE) -> None:
        self.max_request_size = max_request_size
        self._buffer = bytearray()
        self._violation: ProtocolViolation | None = None
        #: A lower frame cap while it is not None (set by the server before authentication).
        self.frame_limit: int | None = None
        #: The next frame is a raw token (:class:`RawFrame`), not a request.
        self.raw_next = False
        #: The pre-parse check of each request header, or None (every request admitted).
        self.admit: Admission | None = None
        #: The versions table this connection is served by, and the decoding plans admitted by it.
        self.versions: dict[ApiKey, tuple[int, int]] = SUPPORTED_VERSIONS
        self._plans = _REQUEST_PLANS

    def serve_versions(self, versions: dict[ApiKey, tuple[int, int]]) -> None:
        """Admit requests by ``versions`` instead of ``SUPPORTED_VERSIONS`` (a node in ZooKeeper mode)."""
        self.versions = versions
        self._plans = _REQUEST_PLANS if versions is SUPPORTED_VERSIONS else _PLANS_BY_TABLE.setdefault(id(versions), {})

    def receive_data(self, data: bytes) -> None:
        """Buffer bytes read from the socket. Parsing happens in :meth:`next_event`."""
        if self._violation is None:
            self._buffer += data

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def next_event(self) -> Event | object:
        """The next complete event, or ``NEED_DATA``."""
        if self._violation is not None:
            return self._violation
        buf = self._buffer
        if len(buf) < 4:
            return NEED_DATA
        (size,) = _SIZE.unpack_from(buf, 0)
        limit = self.max_request_size if self.frame_limit is None else min(self.frame_limit, self.max_request_size)
        if size < 0 or size > limit:
            return self._fail(f"request size {size} outside 0..{limit}")
        if len(buf) < 4 + size:
            return NEED_DATA
        frame = bytes(buf[4 : 4 + size])
        del buf[: 4 + size]
        if self.raw_next:
            self.raw_next = False
            return RawFrame(frame)
        try:
            return self._parse_request(frame)
        except Exception as exc:  # noqa: BLE001 - any decoder failure means a malformed frame
            return self._fail(f"malformed request: {type(exc).__name__}: {exc}")

    def _fail(self, reason: str) -> ProtocolViolation:
        self._violation = ProtocolViolation(reason)
        self._buffer.clear()
        return self._violation

    def _parse_request(self, frame: bytes) -> Event:
        if len(frame) < _HEADER.size:
            return self._fail(f"request header truncated ({len(frame)} bytes)")
        api_key, api_version, correlation_id, client_id_len = _HEADER.unpack_from(frame, 0)
        if self.admit is not None:
            refused = self.admit(api_key, api_version)
            if refused is not None:
                return self._fail(refused)
        pos = _HEADER.size
        if client_id_len < -1 or pos + max(client_id_len, 0) > len(frame):
            return self._fail(f"bad client id length {client_id_len}")
        client_id: str | None = None
        if client_id_len >= 0:
            try:
                client_id = frame[pos : pos + client_id_len].decode("utf-8")
            except UnicodeDecodeError as exc:
                # Our own error, so that a decoder's unexpected exception stays distinguishable.
                raise MalformedRequest(f"client id is not UTF-8: {exc.reason} at byte {exc.start}") from None
            pos += client_id_len
        plan = self._plans.get((api_key, api_version))
        if plan is None:
            try:
                key = ApiKey(api_key)
            except ValueError:
                return self._fail(f"unknown api key {api_key}")
            supported = self.versions.get(key)
            if supported is None:
                return self._fail(f"unsupported api {key.name} (key {api_key})")
            low, high = supported
            if not low <= api_version <= high:
                if key == ApiKey.API_VERSIONS and api_version > high:
                    return UnsupportedApiVersions(api_version, correlation_id, client_id)
                return self._fail(f"{key.name} version {api_version} outside {low}..{high}")
            cls = request_class(key)
            plan = self._plans[(api_key, api_version)] = (key, body_decoder(cls, api_version),
                                                             bool(cls.flexible_version_q(api_version)),
                                                             null_checker(cls, api_version))
        key, decode_body, flexible, check_nulls = plan
        view = memoryview(frame)
        if flexible:
            pos = _skip_tagged_fields(view, pos)
        request = decode_body(view[pos:])  # MalformedRequest for a body the schema cannot read
        check_nulls(request)  # a null the schema forbids: malformed, as Kafka's readers say
        return RequestReceived(key, api_version, correlation_id, client_id, request, len(frame))
