"""The README's examples run as written, tried as a new user would: in a scratch copy of the
repository, after the serving install alone (`make serve`, pyproject's `dependencies` and nothing
from the test extras), against the server `make serve` started, from the copy's directory — then
the walkthrough the README links to, docs/security.md's "Try it", in the same way. That server is
the README's `make serve` with its HTTP listener (``HTTP_SERVE``), which its dashboard examples use.

Every ```sh and ```python block of the README and of docs/security.md is an example and carries a
marker on the line before it: ``<!-- example -->`` (run it to the end, in README order, against the running
server), ``<!-- example: long-running -->`` (a command that serves until Ctrl-C: wait for what it
prints, then Ctrl-C it), ``<!-- example: background -->`` (a second node that serves until
Ctrl-C: started in README order among the examples, once its ports listen the later examples run,
then Ctrl-C stops it and it must exit 0) or ``<!-- example: quick-start -->`` (the two commands;
`make serve` is what the test itself runs). The only change to an example's text is the port: the
server listens on localhost as by default, on a free port instead of 9092 (its HTTP listener on one
instead of 8080), the background node on free ports instead of 9093 and 9094, and the cluster on free
ports instead of 19092..

Also checked without a server: the API table against ``SUPPORTED_VERSIONS``, the command-line
synopsis against the CLI's subcommands, the relative links, and the README's length.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, free_port, free_ports, serving_copy

README = REPO / "README.md"
#: The walkthrough moved out of the README; its examples run after the README's.
SECURITY = REPO / "docs" / "security.md"
#: How the README starts the server its dashboard examples talk to.
HTTP_SERVE = 'make serve ARGS="--set http.listen=127.0.0.1:8080"'
FENCE = re.compile(r"(?:<!-- example(?P<kind>: [a-z-]+)? -->\n)?```(?P<lang>[a-z]*)\n(?P<body>.*?)```\n", re.S)


@dataclass
class Block:
    lang: str
    kind: str | None  # None: no marker; "run", "long-running", "quick-start"
    body: str
    line: int
    source: str = "README.md"

    def __str__(self) -> str:
        return f"{self.source} line {self.line} ({self.lang}, {self.kind})"


def blocks(text: str | None = None, source: str = "README.md") -> list[Block]:
    text = README.read_text() if text is None else text
    found = []
    for m in FENCE.finditer(text):
        marker = m.group(0).startswith("<!--")
        kind = (m.group("kind") or ": run")[2:] if marker else None
        found.append(Block(m.group("lang"), kind, m.group("body"), text.count("\n", 0, m.start("body")), source))
    return found


def walkthrough() -> list[Block]:
    """The README's blocks, then docs/security.md's, in the order a reader runs them."""
    return [*blocks(), *blocks(SECURITY.read_text(), "docs/security.md")]


def examples(kind: str) -> list[Block]:
    return [b for b in blocks() if b.kind == kind]


# --- without a server ------------------------------------------------------------------------


def test_every_sh_and_python_block_is_a_marked_example() -> None:
    found = walkthrough()
    unmarked = [str(b) for b in found if b.lang in ("sh", "python") and b.kind is None]
    assert not unmarked, f"blocks a reader would run but the test would not: {unmarked}"
    assert {b.kind for b in found if b.kind} == {"run", "long-running", "quick-start", "background"}
    assert [b.lang for b in examples("run")].count("python") >= 1
    assert HTTP_SERVE in README.read_text()


def test_the_parser_sees_markers_and_unmarked_blocks() -> None:
    text = "<!-- example -->\n```sh\na\n```\n\n```python\nb\n```\n<!-- example: long-running -->\n```sh\nc\n```\n"
    assert [(b.lang, b.kind, b.body) for b in blocks(text)] == [
        ("sh", "run", "a\n"), ("python", None, "b\n"), ("sh", "long-running", "c\n")]


def test_quick_start_is_the_makefiles_two_commands() -> None:
    (quick,) = examples("quick-start")
    commands = [line.split("#")[0].strip() for line in quick.body.splitlines()]
    assert commands == ["make serve", "make test"]
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r"^serve: ", makefile, re.M) and re.search(r"^test: ", makefile, re.M)


def test_api_table_is_what_the_server_advertises() -> None:
    from protocol.apis import SUPPORTED_VERSIONS

    # The table lives in docs/apis.md; the README links to it.
    assert "(docs/apis.md)" in README.read_text()
    section = (REPO / "docs" / "apis.md").read_text().split("| API (key)", 1)[1]
    documented: dict[int, tuple[int, int]] = {}
    for row in re.findall(r"^\| (.+?) \| ([0-9–/ ]+) \|", section, re.M):
        keys = [int(k) for k in re.findall(r"\((\d+)\)", row[0])]
        ranges = [r.strip() for r in row[1].split("/")]
        assert len(keys) == len(ranges), row
        for key, versions in zip(keys, ranges, strict=True):
            low, _, high = versions.partition("–")
            documented[key] = (int(low), int(high or low))
    advertised = {int(key): versions for key, versions in SUPPORTED_VERSIONS.items()}
    assert documented == advertised


def test_command_line_synopsis_names_every_subcommand() -> None:
    from coordinator.cli import _parser

    section = README.read_text().split("## Command line", 1)[1].split("\n## ", 1)[0]
    synopsis = section.split("```\n", 2)[1]
    documented = {line.split()[1] for line in synopsis.splitlines() if not line.startswith("groupcoord --")}
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert documented == set(sub.choices)


def test_relative_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README.read_text()):
        assert (REPO / target).exists(), target


def test_readme_stays_a_guide() -> None:
    assert len(README.read_text().splitlines()) <= 250


# --- the examples, after the serving install, against `make serve` -----------------------------




def _env() -> dict[str, str]:
    # Nothing of the test run's own interpreter leaks into the copy's (no PYTHONPATH to this
    # checkout, no active virtualenv, no outer make).
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS", "MAKELEVEL", "PYTHONHOME")
    return {k: v for k, v in os.environ.items() if k not in drop}


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = serving_copy(tmp_path_factory.mktemp("readme"))
    base_python = getattr(sys, "_base_executable", sys.executable)
    res = subprocess.run(["make", "--no-print-directory", f"PYTHON={base_python}", "install-serve"], cwd=work,
                         env=_env(), capture_output=True, text=True, timeout=240)
    assert res.returncode == 0, res.stdout + res.stderr[-4000:]
    return work


def _port_up(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def _stop(proc: subprocess.Popen[str], sig: int, timeout: float) -> int:
    """Send ``sig`` to the process group the test started (as Ctrl-C does to a terminal's)."""
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    return int(proc.returncode)


@pytest.fixture(scope="module")
def serving(clone: Path) -> Iterator[Serving]:
    """`make serve` in the copy, on a free port instead of 9092 (still on localhost, as by default),
    with the README's HTTP listener (``HTTP_SERVE``) on a free port instead of 8080."""
    port, http_port = free_port(), free_port()
    http_listen = HTTP_SERVE.split('"')[1].replace("127.0.0.1:8080", f"127.0.0.1:{http_port}")
    log = open(clone.parent / "make-serve.log", "w")
    proc = subprocess.Popen(["make", "--no-print-directory", "serve", f"ARGS=--listen localhost:{port} {http_listen}"],
                            cwd=clone,
                            env=_env(), stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    log.close()
    try:
        deadline = time.monotonic() + 30
        while not _port_up(port, "localhost"):
            assert proc.poll() is None, (clone.parent / "make-serve.log").read_text()
            assert time.monotonic() < deadline, "make serve did not listen within 30 s"
            time.sleep(0.1)
        yield Serving(port, http_port)
    finally:
        _stop(proc, signal.SIGTERM, 30)


# The background node's ports (README: 9093, 9094), free ones for this run.
BACKGROUND_PORTS = re.compile(r"(?<![0-9])(9093|9094)(?![0-9])")


@dataclass(frozen=True)
class Serving:
    port: int  # README: localhost:9092
    http_port: int  # README: 127.0.0.1:8080


def _ports(body: str, serving: Serving, background: dict[str, int]) -> str:
    body = body.replace("localhost:9092", f"localhost:{serving.port}")
    body = body.replace("127.0.0.1:8080", f"127.0.0.1:{serving.http_port}")
    return BACKGROUND_PORTS.sub(lambda m: str(background[m.group(1)]), body)


def _start_background(block: Block, clone: Path, body: str, ports: list[int]) -> subprocess.Popen[str]:
    log = open(clone.parent / "background.log", "w")
    proc = subprocess.Popen(["bash", "-c", body], cwd=clone, env=_env(), stdout=log, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    log.close()
    deadline = time.monotonic() + 30
    while not all(_port_up(p) for p in ports):
        assert proc.poll() is None, f"{block} exited:\n" + (clone.parent / "background.log").read_text()
        assert time.monotonic() < deadline, f"{block} did not listen on {ports} within 30 s"
        time.sleep(0.1)
    return proc


def _run(block: Block, clone: Path, serving: Serving, background: dict[str, int]) -> subprocess.CompletedProcess[str]:
    body = _ports(block.body, serving, background)
    if block.lang == "python":
        # As the README says: saved as example.py and run with .venv/bin/python.
        (clone / "example.py").write_text(body)
        args = [".venv/bin/python", "example.py"]
    else:
        args = ["bash", "-e", "-u", "-c", body]
    res = subprocess.run(args, cwd=clone, env=_env(), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, f"{block} failed:\n{res.stdout}\n{res.stderr}"
    assert res.stdout.strip(), f"{block} printed nothing:\n{res.stderr}"
    return res


@pytest.mark.slow
@pytest.mark.clients
@pytest.mark.timeout(600)
def test_single_node_examples_run_as_written_after_make_serve(clone: Path, serving: Serving) -> None:
    base = free_ports(2)
    background = {"9093": base, "9094": base + 1}
    ran: list[tuple[Block, subprocess.CompletedProcess[str]]] = []
    nodes: list[tuple[Block, subprocess.Popen[str]]] = []
    try:
        for block in walkthrough():
            if block.kind == "background":
                body = _ports(block.body, serving, background)
                nodes.append((block, _start_background(block, clone, body, list(background.values()))))
            elif block.kind == "run":
                ran.append((block, _run(block, clone, serving, background)))
    finally:
        codes = [(str(block), _stop(proc, signal.SIGINT, 30)) for block, proc in nodes]
    assert nodes and all(code == 0 for _, code in codes), codes
    out = {block.lang + ":" + block.body.split("\n", 1)[0]: res.stdout for block, res in ran}
    # Beyond "it ran": what each example is there to show did happen.
    kcat = next(text for head, text in out.items() if head.startswith("sh:kcat"))
    assert "k1=hello @0" in kcat and "k2=world @1" in kcat, kcat
    python = next(text for head, text in out.items() if head.startswith("python:"))
    records = [line for line in python.splitlines() if re.fullmatch(r"\d \d+ b'user-\d' b'amount=\d'", line)]
    assert len(records) == 10, python
    committed = re.findall(r"^billing committed payments (\d) (\d+)$", python, re.M)
    assert sorted(p for p, _ in committed) == ["0", "1", "2"], python
    assert sum(int(offset) for _, offset in committed) == 10, python
    dump = next(text for head, text in out.items() if "dump-log" in head)
    assert "billing" in dump, dump
    # Operating it: the groups tool over the wire, then the HTTP listener of the same server.
    groups = next(text for head, text in out.items() if "groups --bootstrap-server" in head)
    assert re.search(r"^billing +payments +2 +\d+ +\d+ +0 ", groups, re.M), groups  # --describe's offsets view
    assert '"state": "Empty"' in groups and "NEW-OFFSET" in groups and "total lag 0" in groups, groups
    http = next(text for head, text in out.items() if "/readyz" in head)
    assert http.startswith("ready") and 'group_count{protocol="classic"}' in http, http
    assert '"group_id": "billing"' in http, http
    # Security: alice, over SASL_SSL with SCRAM, reads what the administrator wrote on the PLAINTEXT listener.
    secure = next(res.stdout for block, res in ran if "sasl_mechanism" in block.body)
    assert "b'alice logged in'" in secure, secure




@pytest.mark.slow
@pytest.mark.timeout(300)
def test_cluster_example_starts_and_ctrl_c_stops_it(clone: Path) -> None:
    (block,) = examples("long-running")
    base = free_ports(3)
    body = block.body
    for i in range(3):
        body = body.replace(str(19092 + i), str(base + i))
    command, _, comment = body.strip().partition("#")
    expected = comment.split("bootstrap:", 1)[1].strip()
    proc = subprocess.Popen(["bash", "-c", command], cwd=clone, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        bootstrap = None
        assert proc.stdout is not None
        while bootstrap is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"{block} ended before printing its bootstrap:\n{proc.stderr.read() if proc.stderr else ''}"
            if line.startswith("bootstrap: "):
                bootstrap = line.split(":", 1)[1].strip()
        assert bootstrap == expected
        for address in bootstrap.split(","):
            assert _port_up(int(address.rsplit(":", 1)[1])), address
        assert _stop(proc, signal.SIGINT, 60) == 0
    finally:
        if proc.poll() is None:
            _stop(proc, signal.SIGKILL, 10)
    for i in range(3):
        assert not _port_up(base + i)
