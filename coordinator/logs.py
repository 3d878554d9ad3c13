"""Structured logging to stderr: one logfmt line per event (``ts=… level=… logger=… msg=… key=value``).

Context goes in ``extra={...}``; every extra key is printed, so a log line about a connection says
``peer=1.2.3.4:5678 reason="…"`` and can be grepped or parsed by a log shipper.
"""

from __future__ import annotations

import logging
import sys
import time

__all__ = ["setup_logging"]

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def _quote(value: object) -> str:
    text = str(value)
    if text and all(c.isalnum() or c in "-._:/@[]" for c in text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class LogfmtFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        parts = [f"ts={ts}", f"level={record.levelname}", f"logger={record.name}", f"msg={_quote(record.getMessage())}"]
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                parts.append(f"{key}={_quote(value)}")
        if record.exc_info:
            parts.append(f"exc={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
