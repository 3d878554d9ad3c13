"""The key lists that type ``config[key]`` (coordinator/config.py) agree with the settings table."""

from __future__ import annotations

from typing import get_args

from coordinator.config import SETTINGS, FlagSetting, IntSetting, TextSetting, load_config


def test_every_setting_is_typed_once() -> None:
    ints, flags, texts = set(get_args(IntSetting)), set(get_args(FlagSetting)), set(get_args(TextSetting))
    assert not ints & flags and not ints & texts and not flags & texts
    assert ints | flags | texts == set(SETTINGS)


def test_each_key_list_matches_its_settings_values() -> None:
    config = load_config()
    for key in get_args(IntSetting):
        assert type(SETTINGS[key].default) is int and type(config[key]) is int, key
    for key in get_args(FlagSetting):
        assert type(SETTINGS[key].default) is bool and type(config[key]) is bool, key
        assert SETTINGS[key].parse("false") is False, key
    for key in get_args(TextSetting):
        assert type(SETTINGS[key].default) is str and type(config[key]) is str, key
