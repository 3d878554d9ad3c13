"""The import order of groupcoord, written once, and the test that keeps it.

The wings, from the bottom up. A module may import modules of its own wing and of the wings
below it, never above. docs/architecture.md explains each wing; this table is the rule.

    protocol      sans-IO wire and record codecs: bytes in, values out
    storage       the segmented log engine in Kafka's on-disk format; knows logs, not groups
    oprules       pure operator rules: consumer lag in offsets and time, Burrow's status, offset
                  expiry (coordinator/lag/), offset-reset plans (coordinator/offset_reset/); shared
                  by the server, the CLI and the pipeline
    pipeline      PySpark analytics over the offsets log (reads files; launched by the CLI only)
    base          coordinator/ modules everyone shares: config, request context, data dir, logging
    security      (room) TLS/SASL listeners, SCRAM, the authorizer
    topics        hosted topics: registry, configs, partition logs, produce/fetch/list-offsets APIs
    cluster       ZooKeeper: the view, controller, replica manager and fetchers; drives the partitions of topics/
    runtime       the records-first coordinator runtime and its snapshots
    group         the classic group rules (pure state machines) and service.py, their wire adapter
    transactions  (room) the transaction coordinator, shaped like group/
    admin         cluster-level and config APIs (ApiVersions, Metadata, FindCoordinator, ...)
    faults        fault injection for tests (off unless test.faults.enable): the faults a node
                  applies to itself, their bounds, the handlers' wrapper
    ops           HTTP: metrics, health, dashboard (and the fault endpoint)
    server        the asyncio edge, the only code touching client sockets; imports no wing
    face          the wiring and the command line: app, cli, dump_log, the groups tool (tools/),
                  ``groupcoord faults`` (faults_cli)
    testing       the pytest plugin for applications: servers in process or as subprocesses, a
                  cluster on ZooKeeper, the fault handle (docs/testing.md)

Rules besides the order:

* protocol/ is sans-IO: no asyncio, sockets, threads or subprocesses.
* The rules of a coordinator wing (every module of group/ but service.py; transactions/ alike)
  are pure state machines: no asyncio, sockets, threads, files or clock (time and timers are
  injected), so hypothesis drives them.
* group/ and transactions/ import neither topics/ nor server/ (lower or not): they reach the
  logs only through the runtime (and, for transactions, the markers through the ``MarkerWriter``
  handed in), and the network only through what the service hands back.
* The operator rules (coordinator/lag/, coordinator/offset_reset/) are pure like the group rules:
  no I/O, no clock (the caller hands in "now").
* Only the face imports pipeline/ (``groupcoord pipeline run``).
* No import circle between files, whatever the wings.
* Every module of protocol/, storage/, coordinator/ and pipeline/ has a wing: a new top-level
  module of coordinator/ must be placed in the table before it lands.
"""

from __future__ import annotations

import ast
import pathlib
from dataclasses import dataclass

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "storage", "pipeline", "coordinator")

#: (wing, module prefixes) from the bottom up; a module belongs to the longest prefix it matches.
ORDER: list[tuple[str, tuple[str, ...]]] = [
    ("protocol", ("protocol",)),
    ("storage", ("storage",)),
    ("oprules", ("coordinator.lag", "coordinator.offset_reset")),
    ("pipeline", ("pipeline",)),
    ("base", ("coordinator.config", "coordinator.context", "coordinator.data_dir", "coordinator.logs",
              "coordinator.gc_policy")),
    ("security", ("coordinator.security",)),
    ("topics", ("coordinator.topics",)),
    ("cluster", ("coordinator.cluster",)),
    ("runtime", ("coordinator.runtime",)),
    ("group", ("coordinator.group",)),
    ("transactions", ("coordinator.transactions",)),
    ("admin", ("coordinator.admin",)),
    ("faults", ("coordinator.faults",)),
    ("ops", ("coordinator.ops",)),
    ("server", ("coordinator.server",)),
    ("face", ("coordinator", "coordinator.__main__", "coordinator.app", "coordinator.cli", "coordinator.dump_log",
              "coordinator.users_cli", "coordinator.acls_cli", "coordinator.admin_client", "coordinator.groups_cli",
              "coordinator.tools", "coordinator.faults_cli", "coordinator.zk_offsets_cli")),
    ("testing", ("coordinator.testing",)),
]

#: Standard-library modules that do I/O or concurrency: sans-IO code may not import them.
IO_MODULES = frozenset({"asyncio", "socket", "selectors", "ssl", "threading", "subprocess", "multiprocessing",
                        "concurrent", "uvloop"})
#: What the pure rules may not import besides: files and the clock (both are injected).
RULES_FORBIDDEN = IO_MODULES | {"time", "os", "io", "shutil", "pathlib", "tempfile"}
#: Coordinator wings made of pure rules plus one adapter module on the runtime.
RULE_WINGS = ("coordinator.group", "coordinator.transactions", "coordinator.lag", "coordinator.offset_reset")
ADAPTER = "service"
#: Wings a wing may not import even though they stand below it.
NOT_IMPORTED = {"group": {"topics", "server"}, "transactions": {"topics", "server"}}
#: pipeline/ is launched by the command line only.
ONLY_FACE_IMPORTS = "pipeline"


@dataclass(frozen=True)
class Module:
    name: str
    is_package: bool
    source: str


def wing_of(module: str) -> str | None:
    best, best_len, best_prefix = None, -1, ""
    for wing, prefixes in ORDER:
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len, best_prefix = wing, len(prefix), prefix
    # A top-level package's own prefix ("coordinator") only claims the modules named exactly,
    # so a new coordinator/foo.py or coordinator/foo/ is unplaced until the table says where.
    if best_prefix == "coordinator" and module != best_prefix:
        return None
    return best


RANK = {wing: i for i, (wing, _) in enumerate(ORDER)}


def imports_of(mod: Module, known: set[str]) -> list[tuple[str, int]]:
    """Every module ``mod`` imports (ours resolved to the module file, others by top-level name),
    with the line; imports inside functions and under TYPE_CHECKING count too."""
    found: list[tuple[str, int]] = []
    package = mod.name if mod.is_package else mod.name.rpartition(".")[0]
    for node in ast.walk(ast.parse(mod.source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from pkg import submodule` depends on the submodule
                sub = f"{target}.{alias.name}"
                found.append((sub if sub in known else target, node.lineno))
    return found


def _ours(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def _closest_known(name: str, known: set[str]) -> str:
    while name not in known and "." in name:
        name = name.rpartition(".")[0]
    return name


def violations(modules: list[Module]) -> list[str]:
    """Everything in ``modules`` that breaks the rules above, one line each."""
    known = {m.name for m in modules}
    problems: list[str] = []
    graph: dict[str, set[str]] = {m.name: set() for m in modules}
    for mod in modules:
        wing = wing_of(mod.name)
        if wing is None:
            problems.append(f"{mod.name}: belongs to no wing; place it in ORDER (tests/test_layering.py)")
            continue
        parts = mod.name.split(".")
        is_rules = any(mod.name == w or mod.name.startswith(w + ".") for w in RULE_WINGS) and parts[-1] != ADAPTER
        for target, line in imports_of(mod, known):
            top = target.split(".")[0]
            where = f"{mod.name}:{line} imports {target}"
            if not _ours(target):
                if wing == "protocol" and top in IO_MODULES:
                    problems.append(f"{where}: protocol/ is sans-IO")
                if is_rules and top in RULES_FORBIDDEN:
                    problems.append(f"{where}: the rules are pure state machines (inject time, timers and I/O)")
                continue
            target = _closest_known(target, known)
            graph[mod.name].add(target)
            their = wing_of(target)
            if their is None:
                continue  # reported as unplaced on its own line
            if RANK[their] > RANK[wing]:
                problems.append(f"{where}: wing {wing} stands below wing {their}")
            elif their in NOT_IMPORTED.get(wing, ()):
                problems.append(f"{where}: {wing} must not import {their}")
            elif their == ONLY_FACE_IMPORTS and wing not in ("face", ONLY_FACE_IMPORTS):
                problems.append(f"{where}: only the command line launches the pipeline")
    problems += [f"import circle among {', '.join(cycle)}" for cycle in _cycles(graph)]
    return problems


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules of each strongly connected component with more than one module (or a self-import)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:  # Tarjan; the graphs are a few hundred modules, recursion is fine
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, ()):
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def project_modules() -> list[Module]:
    modules = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = list(rel.parts)
            is_package = parts[-1] == "__init__"
            if is_package:
                parts.pop()
            modules.append(Module(".".join(parts), is_package, path.read_text()))
    return modules


# --- the project --------------------------------------------------------------------------------

def test_the_project_keeps_the_import_order() -> None:
    modules = project_modules()
    assert len(modules) > 80  # the walk found the tree
    assert violations(modules) == []


def test_every_wing_in_the_order_exists() -> None:
    # The rooms for the coming wings are packages already, so the table never names a ghost.
    for _, prefixes in ORDER:
        for prefix in prefixes:
            path = ROOT / prefix.replace(".", "/")
            assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), prefix


# --- the checker fails where it must -----------------------------------------------------------

def _tree(**sources: str) -> list[Module]:
    """A small synthetic tree: module name (dots as ``__``) -> source; ``pkg`` suffix marks a package."""
    out = []
    for key, source in sources.items():
        name = key.replace("__", ".")
        is_package = name.endswith(".pkg")
        out.append(Module(name.removesuffix(".pkg"), is_package, source))
    return out


def _only(problems: list[str], needle: str) -> None:
    assert len(problems) == 1 and needle in problems[0], problems


def test_fails_on_a_lower_wing_importing_a_higher_one() -> None:
    _only(violations(_tree(coordinator__topics__fetch="from ..server.server import X",
                           coordinator__server__server="X = 1")),
          "wing topics stands below wing server")


def test_fails_on_protocol_importing_the_coordinator_or_storage() -> None:
    _only(violations(_tree(protocol__records="from coordinator.app import App", coordinator__app="App = 1")),
          "wing protocol stands below wing face")
    _only(violations(_tree(protocol__records="import storage.log", storage__log="")),
          "wing protocol stands below wing storage")


def test_fails_on_storage_importing_the_pipeline() -> None:
    _only(violations(_tree(storage__log="from pipeline.cli import main", pipeline__cli="main = 1")),
          "wing storage stands below wing pipeline")


def test_fails_on_io_in_protocol_and_in_the_group_rules() -> None:
    _only(violations(_tree(protocol__connection="import socket")), "protocol/ is sans-IO")
    _only(violations(_tree(coordinator__group__shard="def f():\n    import asyncio\n")), "pure state machines")
    _only(violations(_tree(coordinator__group__timing="from time import monotonic")), "pure state machines")
    # The adapter may: it runs on the event loop.
    assert violations(_tree(coordinator__group__service="import asyncio")) == []


def test_fails_on_transaction_rules_doing_io_or_importing_topics() -> None:
    _only(violations(_tree(coordinator__transactions__shard="import asyncio")), "pure state machines")
    assert violations(_tree(coordinator__transactions__service="import asyncio")) == []
    _only(violations(_tree(coordinator__transactions__service="from ..topics.registry import X",
                           coordinator__topics__registry="")), "transactions must not import topics")


def test_fails_on_group_importing_topics_though_it_stands_below() -> None:
    _only(violations(_tree(coordinator__group__service="from ..topics.registry import CONSUMER_OFFSETS",
                           coordinator__topics__registry="CONSUMER_OFFSETS = 'x'")),
          "group must not import topics")


def test_fails_on_a_wing_importing_the_pipeline() -> None:
    _only(violations(_tree(coordinator__admin__cluster_apis="import pipeline.cli", pipeline__cli="")),
          "only the command line launches the pipeline")
    assert violations(_tree(coordinator__cli="from pipeline.cli import main", pipeline__cli="main = 1")) == []


def test_fails_on_an_import_circle_even_within_a_wing_and_under_type_checking() -> None:
    problems = violations(_tree(
        storage__log="from .cleaner import clean_log",
        storage__cleaner="from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .log import Log\n"))
    _only(problems, "import circle among storage.cleaner, storage.log")


def test_fails_on_an_unplaced_module() -> None:
    _only(violations(_tree(coordinator__metrics="")), "coordinator.metrics: belongs to no wing")


def test_relative_imports_resolve_from_packages_and_submodules() -> None:
    # `from . import gc_policy` in coordinator/group/service.py is the base module, not the face.
    assert violations(_tree(coordinator__group__service="from .. import gc_policy", coordinator__gc_policy="",
                            coordinator__pkg="")) == []
    _only(violations(_tree(coordinator__runtime__pkg="from ..server import server",
                           coordinator__server__server="")),
          "wing runtime stands below wing server")


@pytest.mark.parametrize("wing", [w for w, _ in ORDER])
def test_the_docstring_lists_every_wing(wing: str) -> None:
    assert f"\n    {wing} " in __doc__
