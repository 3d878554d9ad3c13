"""A real Prometheus for the tests, and what Grafana does between a dashboard and Prometheus.

``PrometheusServer`` runs the ``prometheus`` binary (Debian's package, installed by
``tests/coordinator/ops/setup_prometheus.sh``; or ``GROUPCOORD_PROMETHEUS``) on a free loopback
port with a temporary configuration scraping the given targets every second and a temporary
storage directory, and queries it through its HTTP API
(https://prometheus.io/docs/prometheus/latest/querying/api/).

The Grafana half is the Prometheus data source's rules as Grafana's source states them
(https://github.com/grafana/grafana, ``public/app/plugins/datasource/prometheus/``):

* a ``query_result(EXPR)`` template variable runs EXPR as an instant query and turns each series
  into the text ``name{k="v",...} value timestamp_ms`` (``metric_find_query.ts``); the variable's
  ``regex`` keeps the texts it matches, its first group becoming the option; options are
  de-duplicated and, with ``sort: 1``, sorted alphabetically; when none is left, the one option is
  "None", whose value is the empty string (``updateVariableOptions`` in
  ``public/app/features/variables/query/reducer.ts``);
* a variable's value is written into the query as it is when the variable is neither multi-value
  nor has "All" (only backslashes and single quotes escaped, ``prometheusRegularEscape``), else
  regex-escaped (``prometheusSpecialRegexEscape``), several values as ``(a|b)``; "All" with a
  custom ``allValue`` is that value, unescaped (``interpolateQueryExpr`` in ``datasource.ts``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import free_port

SETUP_SCRIPT = "tests/coordinator/ops/setup_prometheus.sh"


def prometheus_binary() -> str:
    """The Prometheus server to run; fails the test, naming the setup script, when there is none."""
    configured = os.environ.get("GROUPCOORD_PROMETHEUS")
    found = configured or shutil.which("prometheus")
    if not found or not os.access(found, os.X_OK):
        pytest.fail(f"Prometheus not found ({'GROUPCOORD_PROMETHEUS=' + configured if configured else 'not on PATH'}):"
                    f" run {SETUP_SCRIPT} (it installs Debian's prometheus package)", pytrace=False)
    return found


class PrometheusError(AssertionError):
    """Prometheus answered a query with an error (a PromQL error: bad syntax, many-to-many matching...)."""


class PrometheusServer:
    """A ``prometheus`` process scraping ``targets`` every second: (``host:port``, labels added to
    its series) pairs; one address may come twice with different labels, as two targets."""

    def __init__(self, work_dir: Path, targets: Sequence[tuple[str, Mapping[str, str]]],
                 job: str = "groupcoord") -> None:
        self.work_dir = work_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.job = job
        self.log_path = work_dir / "prometheus.log"
        self.proc: subprocess.Popen[bytes] | None = None
        static = [{"targets": [address], "labels": dict(labels)} for address, labels in targets]
        # YAML is a superset of JSON: the configuration is written as JSON.
        self.targets = len(static)
        self.config: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [{"job_name": job, "metrics_path": "/metrics", "static_configs": static}],
        }

    def start(self, timeout: float = 30.0) -> None:
        binary = prometheus_binary()
        config_path = self.work_dir / "prometheus.yml"
        config_path.write_text(json.dumps(self.config, indent=1))
        storage = self.work_dir / "tsdb"
        storage.mkdir()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config_path}", f"--storage.tsdb.path={storage}",
             "--storage.tsdb.retention.time=1h", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"],
            cwd=self.work_dir, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            assert time.monotonic() < deadline, f"prometheus not ready after {timeout} s:\n{self.log_text()}"
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def _api(self, path: str, params: Mapping[str, str]) -> Any:
        # POST, as Grafana sends queries by default: long expressions do not hit URL limits.
        body = urllib.parse.urlencode(params).encode()
        request = urllib.request.Request(f"{self.url}/api/v1/{path}", data=body, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                answer = json.load(reply)
        except urllib.error.HTTPError as error:
            answer = json.load(error)
        if answer.get("status") != "success":
            raise PrometheusError(f"{answer.get('errorType')}: {answer.get('error')} ({params.get('query')!r})")
        return answer["data"]

    def query(self, expr: str, at: float) -> list[dict[str, Any]]:
        """An instant query's vector at ``at`` (Unix seconds): ``[{"metric": {...}, "value": [t, "v"]}]``."""
        data = self._api("query", {"query": expr, "time": f"{at:.3f}"})
        assert data["resultType"] == "vector", data
        return list(data["result"])

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query's matrix, as a graph panel asks: ``[{"metric": {...}, "values": [[t, "v"], ...]}]``."""
        data = self._api("query_range", {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                         "step": f"{step:g}"})
        assert data["resultType"] == "matrix", data
        return list(data["result"])

    def wait_for_target_up(self, timeout: float = 30.0) -> None:
        """Until every target has been scraped successfully once."""
        deadline = time.monotonic() + timeout
        while True:
            up = self.query(f'up{{job="{self.job}"}}', time.time())
            if len(up) == self.targets and all(s["value"][1] == "1" for s in up):
                return
            assert time.monotonic() < deadline, f"targets not up after {timeout} s: {up}\n{self.log_text()}"
            time.sleep(0.2)

    def wait_for_scrape_after(self, at: float, timeout: float = 30.0) -> None:
        """Until every target has a stored scrape that started at or after ``at``. A target's
        scrapes run one after another, so every earlier one is stored too."""
        deadline = time.monotonic() + timeout
        while True:
            up = self.query(f'timestamp(up{{job="{self.job}"}})', time.time())
            if up and all(float(s["value"][1]) >= at for s in up):
                return
            assert time.monotonic() < deadline, f"no scrape after {at} within {timeout} s: {up}"
            time.sleep(0.2)


# --- Grafana's side ---------------------------------------------------------------------------

def grafana_regular_escape(value: str) -> str:
    """A single-value variable's value in a Prometheus query (``prometheusRegularEscape``)."""
    return value.replace("\\", "\\\\").replace("'", "\\\\'")


_REGEX_META = re.compile(r"[$^*{}\[\]+?.()|]")


def grafana_regex_escape(value: str) -> str:
    """A multi-value or "All" variable's value (``prometheusSpecialRegexEscape``): regex
    metacharacters get a backslash, doubled for PromQL's string literal."""
    return _REGEX_META.sub(lambda m: "\\\\" + m.group(0), value.replace("\\", "\\\\\\\\"))


def interpolate(expr: str, values: Mapping[str, str | Sequence[str]],
                variables: Mapping[str, Mapping[str, Any]]) -> str:
    """``expr`` with each ``$name`` replaced as Grafana's Prometheus data source replaces it.
    A value of ``"$__all"`` stands for the "All" option."""
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        variable = variables[name]
        value = values[name]
        if value == "$__all":
            assert variable.get("includeAll") and variable.get("allValue"), name
            return str(variable["allValue"])
        if not variable.get("multi") and not variable.get("includeAll"):
            assert isinstance(value, str), name
            return grafana_regular_escape(value)
        if isinstance(value, str):
            return grafana_regex_escape(value)
        escaped = [grafana_regex_escape(v) for v in value]
        return escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
    # Longest names first is not needed: the dashboard's names are not prefixes of one another.
    return re.sub(r"\$(\w+)", one, expr)


def query_result_texts(result: Iterable[Mapping[str, Any]]) -> list[str]:
    """An instant vector as Grafana's ``query_result()`` shows it: ``name{k="v",...} value ms``."""
    texts = []
    for series in result:
        labels = dict(series["metric"])
        name = labels.pop("__name__", "")
        body = ",".join(f'{k}="{v}"' for k, v in labels.items())
        at, value = series["value"]
        texts.append(f"{name}{{{body}}} {value} {at * 1000:g}")
    return texts


def variable_options(prometheus: PrometheusServer, variable: Mapping[str, Any],
                     values: Mapping[str, str | Sequence[str]], variables: Mapping[str, Mapping[str, Any]],
                     at: float) -> list[str]:
    """The values Grafana offers for a ``query_result(...)`` variable with a ``/regex/``; when
    nothing matches, its one "None" option, whose value is the empty string."""
    match = re.fullmatch(r"query_result\((.+)\)\s*", variable["query"])
    assert match, variable["query"]
    texts = query_result_texts(prometheus.query(interpolate(match.group(1), values, variables), at))
    regex = re.compile(variable["regex"].strip("/"))
    options: list[str] = []
    for text in texts:
        found = regex.search(text)
        if found is None:
            continue
        value = found.group(1) if found.groups() else text
        if value not in options:
            options.append(value)
    if variable.get("sort") == 1:  # alphabetical, ascending
        options.sort()
    return options or [""]
