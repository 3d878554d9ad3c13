"""Run a stock-client program in the background while a test does something else (crash or
restart the server), collecting its stdout lines as they come."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from tests.clients.tools import _which, compile_java, java_classpath


class Background:
    def __init__(self, args: Sequence[str], env: dict[str, str] | None = None) -> None:
        self.args = [str(a) for a in args]
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.lines: list[str] = []
        self.err_lines: list[str] = []
        self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     errors="replace", start_new_session=True, env=full_env)
        self._threads = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines), daemon=True),
                         threading.Thread(target=self._pump, args=(self.proc.stderr, self.err_lines), daemon=True)]
        for t in self._threads:
            t.start()

    @staticmethod
    def _pump(stream, into: list[str]) -> None:  # type: ignore[no-untyped-def]
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for(self, pred: Callable[[list[str]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if pred(self.lines):
                return True
            if self.proc.poll() is not None:
                time.sleep(0.2)
                return pred(self.lines)
            time.sleep(0.02)
        return False

    def wait(self, timeout: float) -> int | None:
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = None
        for t in self._threads:
            t.join(5)
        return rc

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    @property
    def stdout(self) -> str:
        return "\n".join(self.lines)

    def describe(self, tail: int = 60) -> str:
        return (f"$ {' '.join(self.args)}\n[exit {self.proc.poll()}]\n--- stdout (tail) ---\n"
                + "\n".join(self.lines[-tail:]) + "\n--- stderr (tail) ---\n" + "\n".join(self.err_lines[-tail:]))


def start_java(main_class: str, args: Sequence[str], sources: Sequence[str] | None = None) -> Background:
    java = _which("java")
    classes = compile_java(*(sources or [f"{main_class}.java"]))
    classpath = os.pathsep.join([str(classes), java_classpath()])
    return Background([java, "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", classpath, main_class, *args])


def start_node(script: str, args: Sequence[str]) -> Background:
    """``tests/clients/js/<script>`` in the background, kafkajs resolvable via NODE_PATH."""
    from tests.clients.tools import JS_SRC, kafkajs_dir

    return Background([_which("node"), str(JS_SRC / script), *args],
                      env={"NODE_PATH": str(kafkajs_dir() / "node_modules"), "KAFKAJS_NO_PARTITIONER_WARNING": "1"})
