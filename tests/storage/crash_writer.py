"""Subprocess for ``test_crash``: durable appends forever, one stdout line per acknowledgement.

Usage: ``python crash_writer.py <root>``. Each acknowledged append prints ``<offset> <value>``
and flushes stdout, so whatever the parent has read was acknowledged before the SIGKILL.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from protocol.records import build_batch  # noqa: E402
from storage import Log, LogOptions  # noqa: E402


async def main(root: str) -> None:
    log = await Log.open_async(root, "crash", 0, LogOptions(segment_bytes=32 * 1024, flush_policy="fsync"))
    counter = 0

    async def appender(n: int) -> None:
        nonlocal counter
        while True:
            counter += 1
            value = b"w%d-%d" % (n, counter)
            r = await log.append(build_batch([(b"key-%d" % n, value)], timestamp_ms=1000))
            sys.stdout.write(f"{r.base_offset} {value.decode()}\n")
            sys.stdout.flush()

    await asyncio.gather(*[appender(n) for n in range(16)])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
