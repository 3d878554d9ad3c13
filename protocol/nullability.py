"""Nulls where Kafka's schema forbids them make a request malformed (issue 22).

The codec decodes a length of -1 as None for any string, bytes or array field, nullable or not;
Kafka's generated readers throw instead ("non-nullable field X was serialized as null"), and the
broker closes the connection. So do we: a request with a null in a field whose
``nullableVersions`` do not cover its version never reaches a handler. The check walks only the
fields that can hold a null (strings, bytes, records, arrays and structs), with a plan compiled
once per api key and version.
"""

from __future__ import annotations

from collections.abc import Callable

from .kafka_types import KafkaMessageClass, KafkaSchemaField, KafkaStruct

__all__ = ["null_checker", "NullInNonNullableField"]

_NULLABLE_TYPES = ("string", "bytes", "records")


class NullInNonNullableField(ValueError):
    pass


Plan = list[tuple[str, bool, "Plan | None", bool]]

#: The plan of a []string or []bytes field: its elements may not be null.
_ELEMENTS: Plan = [("", False, None, False)]


def _plan(fields: dict[str, KafkaSchemaField], version: int) -> Plan:
    """(attribute, nullable, plan of the items or struct, is a struct array) per relevant field."""
    out: Plan = []
    for name, field in fields.items():
        if not field.for_version_q(version):
            continue
        # A tagged field may be absent (the codec leaves its default, None for a struct).
        nullable = bool(field.nullable_for_version_q(version)) or bool(field.tagged_field_q(version))
        if field.is_struct_array() or field.is_struct():
            sub = _plan(field.fields or {}, version)
            out.append((name, nullable, sub, bool(field.is_struct_array())))
        elif field.is_array():
            # The elements of a []string or []bytes are never nullable (Kafka's readers: "non-nullable
            # field X element was serialized as null"), whatever the array itself is.
            elements = field.array_of.type_str in _NULLABLE_TYPES
            if not nullable or elements:
                out.append((name, nullable, _ELEMENTS if elements else None, True))
        elif field.type_str in _NULLABLE_TYPES:
            if not nullable:
                out.append((name, False, None, False))
    return out


def _check(obj: KafkaStruct, plan: Plan, path: str) -> None:
    for name, nullable, sub, is_array in plan:
        value = getattr(obj, name, None)
        if value is None:
            if not nullable:
                raise NullInNonNullableField(f"non-nullable field {path}{name} was serialized as null")
            continue
        if sub is _ELEMENTS:
            if any(item is None for item in value):
                raise NullInNonNullableField(f"non-nullable field {path}{name} element was serialized as null")
        elif sub:
            if is_array:
                for item in value:
                    _check(item, sub, f"{path}{name}[].")
            else:
                _check(value, sub, f"{path}{name}.")


def null_checker(cls: KafkaMessageClass, version: int) -> Callable[[KafkaStruct], None]:
    """A function raising :class:`NullInNonNullableField` for a decoded ``cls`` message of
    ``version`` holding a null where the schema does not allow one."""
    plan = _plan(cls.fields, version)

    def check(message: KafkaStruct) -> None:
        _check(message, plan, "")

    return check
