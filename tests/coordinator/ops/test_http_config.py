"""The HTTP listener's and lag monitor's settings (coordinator/config.py): defaults, and bad
values stopping start-up with an error naming the key."""

from __future__ import annotations

import pytest

from coordinator.config import ConfigError, load_config


def test_defaults_leave_the_http_listener_off() -> None:
    config = load_config()
    assert config["http.listen"] == ""
    assert config["http.admin.enabled"] is False
    assert config["http.request.max.bytes"] == 65536
    assert config["lag.sample.interval.ms"] == 10000
    assert config["lag.lookup.table.size"] == 60
    assert (config["lag.burrow.intervals"], config["lag.burrow.min.distance.ms"], config["lag.burrow.allowed.lag"]) \
        == (10, 0, 0)
    assert config["lag.cluster.name"] == ""


def test_values_are_parsed() -> None:
    config = load_config(overrides=["http.listen=127.0.0.1:8080", "http.admin.enabled=true",
                                    "lag.cluster.name=prod", "lag.sample.interval.ms=500"])
    assert config["http.listen"] == "127.0.0.1:8080"
    assert config["http.admin.enabled"] is True
    assert config["lag.cluster.name"] == "prod"
    assert config["lag.sample.interval.ms"] == 500
    assert load_config(overrides=["http.listen=[::1]:0"])["http.listen"] == "[::1]:0"


@pytest.mark.parametrize("item", [
    "http.listen=localhost", "http.listen=localhost:99999", "http.listen=PLAINTEXT://localhost:80",
    "http.listen=a:1,b:2", "http.admin.enabled=maybe", "http.request.max.bytes=10",
    "lag.sample.interval.ms=0", "lag.lookup.table.size=1", "lag.burrow.intervals=0",
    "lag.burrow.min.distance.ms=-1", "lag.burrow.allowed.lag=x",
])
def test_bad_values_name_the_key(item: str) -> None:
    key = item.partition("=")[0]
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(overrides=[item])
