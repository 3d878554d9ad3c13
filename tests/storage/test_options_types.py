"""``LogOptionChanges``, the type of ``LogOptions.with_``'s keywords, lists the fields of ``LogOptions``."""

from __future__ import annotations

import dataclasses
from typing import get_type_hints

from storage.options import LogOptionChanges, LogOptions


def test_the_changes_name_every_field_with_its_type() -> None:
    fields = get_type_hints(LogOptions)
    assert get_type_hints(LogOptionChanges) == {f.name: fields[f.name] for f in dataclasses.fields(LogOptions)}
    assert LogOptionChanges.__required_keys__ == frozenset()
