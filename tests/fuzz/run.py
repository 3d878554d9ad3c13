"""Run fuzz harnesses with atheris (libFuzzer): ``python -m tests.fuzz.run <name> [options]``.

    python -m tests.fuzz.run records --seconds 60       # one harness, time-boxed
    python -m tests.fuzz.run frames --runs 1000000      # one harness, a number of inputs
    python -m tests.fuzz.run requests --seconds 600 --jobs 2
    python -m tests.fuzz.run --all --seconds 10         # every harness in turn
    python -m tests.fuzz.run --list

Each run is a child process (``--child``) that imports the harness, instruments the functions of
its ``INSTRUMENT`` modules and hands ``one_input`` to libFuzzer. The parent seeds a corpus
directory from ``seeds()`` and ``tests/fuzz/regressions/<name>/``, streams the child's output,
and afterwards copies any crash, timeout or out-of-memory input into
``tests/fuzz/regressions/<name>/<sha1>``, where ``test_regressions.py`` replays it from then on.
It prints one summary line per harness (inputs, seconds, cov, ft, crashes) and exits 1 if any
harness crashed. libFuzzer stops at the first crash, so a run finds at most one per job.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import re
import subprocess
import sys
import tempfile
import threading
import time
import types
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz.harness import FUZZ_DIR, discover, load, regression_inputs, regressions_dir

REPO = FUZZ_DIR.parent.parent
#: libFuzzer's per-input timeout (seconds): every input must be fast; a decoder that loops or
#: allocates by an unchecked length is a finding, reported as a "timeout-" or "oom-" artifact.
DEFAULT_TIMEOUT = 10
DEFAULT_RSS_LIMIT_MB = 2048
#: Address-space cap of the child, above the RSS limit: a decoder that asks for gigabytes because
#: a length field said so gets MemoryError at once (an uncaught exception, so a crash with its
#: input) instead of slowly paging and being killed between libFuzzer's one-second RSS checks.
_ADDRESS_SPACE_MB = 6144
_ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-")
#: libFuzzer's status lines: "#12345	DONE   cov: 310 ft: 1264 corp: 84/3021b ...".
_STATUS = re.compile(r"^#(\d+)\s+(\w+)\s+cov: (\d+) ft: (\d+)(?: corp: (\d+)/)?")
_EXECS = re.compile(r"^stat::number_of_executed_units: (\d+)")
#: What --quiet hides: per-input status, the dictionary summary, and the warnings of a libFuzzer
#: built without sanitizers (atheris's), which are expected.
_CHATTER = ("#", '"', "WARNING: Failed to find function", "Loaded 1024/")


@dataclass
class Result:
    name: str
    execs: int = 0
    seconds: float = 0.0
    cov: int = 0
    ft: int = 0
    corpus: int = 0
    exit_codes: list[int] = field(default_factory=list)
    saved: list[Path] = field(default_factory=list)

    @property
    def crashed(self) -> bool:
        return bool(self.saved) or any(code != 0 for code in self.exit_codes)

    def summary(self) -> str:
        rate = self.execs / self.seconds if self.seconds else 0.0
        line = (f"fuzz {self.name}: {self.execs} inputs in {self.seconds:.1f} s ({rate:.0f}/s), "
                f"cov {self.cov}, ft {self.ft}, corpus {self.corpus}, crashes {len(self.saved)}")
        if self.crashed:
            line += ", exit codes " + ",".join(map(str, self.exit_codes))
            line += "".join(f"\n  saved {path.relative_to(REPO)}" for path in self.saved)
        return line


# --- the child: one libFuzzer process ---------------------------------------------------------


#: kafka-python (and protocol.request_codec, with its emitters) compile message decoders at run time
#: from generated source; those functions belong to no module ("<codegen_decode:...>"). A harness
#: names them by this pseudo-module in INSTRUMENT, alone: all of kafka.protocol is ~600 functions
#: more, whose instrumentation costs ~10 s of start-up for code the decoders barely call.
_GENERATED_OWNER = "kafka.protocol.generated"


def _owned_by(func: types.FunctionType, prefixes: tuple[str, ...]) -> bool:
    module = func.__module__
    if module is None and func.__code__.co_filename.startswith("<codegen_"):
        module = _GENERATED_OWNER
    return module is not None and any(module == p or module.startswith(p + ".") for p in prefixes)


def _instrument(prefixes: tuple[str, ...]) -> int:
    """Instrument every function already defined by the INSTRUMENT modules.

    After the harness is imported, so what it imported (and any decoders it compiled eagerly) is
    covered; filtered by owner so libFuzzer's coverage map counts the edges of our decoders, not
    of the interpreter's standard library.
    """
    import atheris

    # Closures made per api version share one code object: patch each code object once.
    patched: dict[types.CodeType, types.CodeType] = {}
    for obj in gc.get_objects():
        if not (isinstance(obj, types.FunctionType) and _owned_by(obj, prefixes)):
            continue
        code = obj.__code__
        if code not in patched:
            try:
                atheris.instrument_func(obj)
            except Exception as exc:  # noqa: BLE001 - one odd function must not stop the run
                print(f"fuzz: cannot instrument {obj.__qualname__}: {exc}", file=sys.stderr)
                continue
            patched[code] = obj.__code__
        else:
            obj.__code__ = patched[code]
    return len(patched)


def _child(name: str, libfuzzer_args: list[str]) -> None:
    import resource

    import atheris

    limit = _ADDRESS_SPACE_MB << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    harness = load(name)
    count = _instrument(tuple(harness.INSTRUMENT))
    print(f"fuzz {name}: instrumented {count} functions of {', '.join(harness.INSTRUMENT)}", file=sys.stderr)
    atheris.Setup([sys.argv[0], *libfuzzer_args], harness.one_input)
    atheris.Fuzz()


# --- the parent -------------------------------------------------------------------------------


def _seed_corpus(name: str, corpus: Path) -> int:
    harness = load(name)
    inputs = list(harness.seeds()) + [p.read_bytes() for p in regression_inputs(name)]
    for data in inputs:
        (corpus / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(inputs)


def _save_artifacts(name: str, artifacts: Path) -> list[Path]:
    saved = []
    for path in sorted(artifacts.iterdir()):
        if not path.name.startswith(_ARTIFACT_PREFIXES):
            continue
        data = path.read_bytes()
        target = regressions_dir(name) / hashlib.sha1(data).hexdigest()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        saved.append(target)
    return saved


def run_harness(name: str, *, seconds: int | None, runs: int | None, jobs: int, timeout: int,
                rss_limit_mb: int, max_len: int | None, corpus_dir: Path | None, quiet: bool,
                seed: int = 0) -> Result:
    result = Result(name)
    with tempfile.TemporaryDirectory(prefix=f"fuzz-{name}-") as tmp:
        corpus = corpus_dir or Path(tmp, "corpus")
        artifacts = Path(tmp, "artifacts")
        corpus.mkdir(parents=True, exist_ok=True)
        artifacts.mkdir()
        seeded = _seed_corpus(name, corpus)
        args = [str(corpus), f"-artifact_prefix={artifacts}/", f"-timeout={timeout}",
                f"-rss_limit_mb={rss_limit_mb}", "-print_final_stats=1"]
        if seconds is not None:
            args.append(f"-max_total_time={seconds}")
        if runs is not None:
            args.append(f"-runs={runs}")
        if max_len is not None:
            args.append(f"-max_len={max_len}")
        print(f"fuzz {name}: {seeded} seed inputs, {jobs} job(s), "
              + (f"{seconds} s" if seconds is not None else f"{runs} runs"), file=sys.stderr, flush=True)
        start = time.monotonic()
        procs = []
        for job in range(jobs):
            # Jobs share the corpus directory (libFuzzer reloads it) but not their random seed.
            # Seed 0 is libFuzzer's "pick one" (it prints it): each CI run explores new inputs, and
            # a crash is reproducible from its saved input, not from the seed.
            cmd = [sys.executable, "-m", "tests.fuzz.run", "--child", name, "--", *args,
                   f"-seed={seed + job if seed else 0}"]
            procs.append(subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True, errors="replace"))
        last: dict[int, tuple[int, int, int, int]] = {}
        execs: dict[int, int] = {}

        # One reader thread per job: keeps each job's pipe drained and its stats apart.
        def pump(job: int, proc: subprocess.Popen[str]) -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                if not quiet or not line.startswith(_CHATTER):
                    sys.stderr.write(line if jobs == 1 else f"[{job}] {line}")
                if m := _STATUS.match(line):
                    last[job] = (int(m.group(1)), int(m.group(3)), int(m.group(4)), int(m.group(5) or 0))
                elif m := _EXECS.match(line):
                    execs[job] = int(m.group(1))

        threads = [threading.Thread(target=pump, args=(job, proc)) for job, proc in enumerate(procs)]
        for thread in threads:
            thread.start()
        for proc, thread in zip(procs, threads, strict=True):
            result.exit_codes.append(proc.wait())
            thread.join()
        result.seconds = time.monotonic() - start
        for job in range(jobs):
            status = last.get(job, (0, 0, 0, 0))
            result.execs += execs.get(job, status[0])
            result.cov = max(result.cov, status[1])
            result.ft = max(result.ft, status[2])
            result.corpus = max(result.corpus, status[3])
        result.saved = _save_artifacts(name, artifacts)
    return result


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        _child(argv[1], argv[3:] if argv[2:3] == ["--"] else argv[2:])
        return 0
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n")[0])
    parser.add_argument("name", nargs="?", help="harness name (tests/fuzz/fuzz_<name>.py)")
    parser.add_argument("--all", action="store_true", help="every harness in turn")
    parser.add_argument("--list", action="store_true", help="print the harness names")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--seconds", type=int, help="stop after this many seconds (per harness)")
    budget.add_argument("--runs", type=int, help="stop after this many inputs (per harness and job)")
    parser.add_argument("--jobs", type=int, default=1, help="parallel libFuzzer processes per harness")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds one input may take")
    parser.add_argument("--rss-limit-mb", type=int, default=DEFAULT_RSS_LIMIT_MB)
    parser.add_argument("--max-len", type=int, help="longest input libFuzzer generates (default: its own guess)")
    parser.add_argument("--corpus", type=Path, help="keep the corpus in this directory (default: a temporary one)")
    parser.add_argument("--quiet", action="store_true", help="hide libFuzzer's per-input status lines")
    parser.add_argument("--seed", type=int, default=0, help="libFuzzer's random seed (default: a new one each run)")
    opts = parser.parse_args(argv)
    names = discover()
    if opts.list:
        print("\n".join(names))
        return 0
    if opts.all:
        chosen = names
    elif opts.name in names:
        chosen = [opts.name]
    else:
        parser.error(f"name one of {', '.join(names)} (or --all)")
    if opts.seconds is None and opts.runs is None:
        opts.seconds = 60
    results = []
    for name in chosen:
        corpus = opts.corpus / name if opts.corpus and len(chosen) > 1 else opts.corpus
        results.append(run_harness(name, seconds=opts.seconds, runs=opts.runs, jobs=opts.jobs,
                                   timeout=opts.timeout, rss_limit_mb=opts.rss_limit_mb, max_len=opts.max_len,
                                   corpus_dir=corpus, quiet=opts.quiet, seed=opts.seed))
        print(results[-1].summary(), flush=True)
    if len(results) > 1:
        print(f"fuzz: {len(results)} harnesses, {sum(r.execs for r in results)} inputs, "
              f"{sum(r.crashed for r in results)} crashed", flush=True)
    return 1 if any(r.crashed for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
