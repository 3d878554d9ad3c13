"""fsync one after another vs all at once, for N files each given a small append (the shape of
the offsets partitions' group-commit rounds). Why ``storage/io_worker.py`` runs a wake-up's fsyncs
on a pool.

Run: ``.venv/bin/python bench/fsync_concurrency.py [--files 16] [--rounds 30] [--dir DIR]``
(DIR defaults to a fresh temporary directory on the file system of /tmp).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor


def one_round(fds: list[int], pool: ThreadPoolExecutor | None) -> float:
    for fd in fds:
        os.write(fd, b"x" * 1000)
    start = time.perf_counter()
    if pool is None:
        for fd in fds:
            os.fsync(fd)
    else:
        list(pool.map(os.fsync, fds))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as d, ThreadPoolExecutor(args.files) as pool:
        fds = [os.open(os.path.join(d, f"f{i}"), os.O_CREAT | os.O_WRONLY) for i in range(args.files)]
        try:
            for name, p in (("one after another", None), ("all at once", pool)) * 2:
                times = sorted(one_round(fds, p) for _ in range(args.rounds))
                print(f"{args.files} files, fsync {name}: p50 {statistics.median(times) * 1e3:.2f} ms, "
                      f"max {times[-1] * 1e3:.2f} ms per round ({args.rounds} rounds)")
        finally:
            for fd in fds:
                os.close(fd)


if __name__ == "__main__":
    main()
