"""A groupcoord node inside the test process: the App on an event loop of a thread of its own.

    server = EmbeddedServer(tmp_path / "data", {"group.max.size": "5"})
    server.start()
    ...  # clients connect to server.bootstrap_servers
    server.crash_restart()  # as after a SIGKILL: same data directory, same port
    server.stop()

The node is the real one (``App(config, embedded=True)``: no signal handlers, no gc freeze, see
coordinator/app.py); settings are ``FIXTURE_SETTINGS`` overridden by the caller's. Its log records
go to the ``groupcoord`` logger and whatever handlers the host configured (pytest captures them);
nothing here configures logging. An exception of the node's thread is raised by ``start``,
``stop`` or ``crash_restart``, chained to the original with its traceback; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Coroutine, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..faults_cli import FaultError
from .kafka_python_warnings import import_quietly
from .server_base import ServerBase

if TYPE_CHECKING:
    from ..app import App
    from ..config import Config
    from ..faults.engine import FaultEngine
    from .faults import FaultHandle

__all__ = ["EmbeddedServer", "ServerError"]

log = logging.getLogger("groupcoord.testing")

#: How long a stopped or crashed node's thread may take to end once its loop is told to stop.
_JOIN_S = 10.0


class ServerError(RuntimeError):
    """The node failed to start, stop or restart; ``__cause__`` is what it raised, if anything."""


class EmbeddedServer(ServerBase):
    def __init__(self, data_dir: str | Path, settings: Mapping[str, object] | None = None, port: int = 0) -> None:
        super().__init__(data_dir, settings, port)
        self.app: App | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._run: asyncio.Future[int] | None = None
        self._restart: asyncio.Task[None] | None = None
        self._lock = threading.RLock()

    # --- what tests use -----------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The running node's configuration (before the first start: the one it will get)."""
        return self.app.config if self.app is not None else self._config()

    @property
    def faults(self) -> FaultHandle:
        """The ``FaultHandle`` (coordinator/testing/faults.py) of this node, valid across restarts.
        Imported when first asked for: a test that injects no fault loads none of it."""
        if self._faults is None:
            if self.loop is None:
                raise ServerError("the server is not started")
            from .faults import FaultHandle, LocalTransport  # quiet: start() loaded kafka-python

            self._faults = FaultHandle(LocalTransport(_CurrentEngine(self), self.loop), restart=self.crash_restart)
        return self._faults

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._run is not None \
            and not self._run.done()

    def start(self, timeout: float = 30.0) -> EmbeddedServer:
        """Start the node; returns once its Kafka listener accepts connections."""
        with self._lock:
            if self._thread is not None:
                raise ServerError("the server is already started")
            self.data_dir.mkdir(parents=True, exist_ok=True)
            config = self._config()  # a bad setting raises ConfigError here, in the caller's thread
            # The node's code is imported here, in the caller's thread, where warning filters can
            # be set for the import alone (kafka_python_warnings.py); the node's thread finds it loaded.
            import_quietly("coordinator.app")
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=_run_loop, args=(loop,), name=f"groupcoord-{self.data_dir.name}",
                                      daemon=True)
            self.loop, self._thread = loop, thread
            thread.start()
            try:
                self._on_loop(self._launch(config), timeout, "start")
            except BaseException:
                self._end_thread(abort=True)
                raise
            return self

    def stop(self, timeout: float = 30.0) -> None:
        """Shut the node down gracefully (as on SIGTERM) and end its thread. A node that does not
        stop within ``timeout`` is aborted. Raises what the node's thread raised, if anything."""
        with self._lock:
            if self._thread is None:
                return
            try:
                self._on_loop(self._shutdown(), timeout, "stop")
            finally:
                self._end_thread(abort=True)

    def crash_restart(self, timeout: float = 30.0) -> None:
        """As a SIGKILL and a new start: the node is aborted (``App.abort``: no snapshot, no
        shutdown step, connections reset) and a new one starts on the same data directory and
        port, recovering from the logs. Returns once it accepts connections."""
        with self._lock:
            if self._thread is None or self.loop is None:
                raise ServerError("the server is not started")
            self._on_loop(self._abort_and_launch(), timeout, "restart")

    def __enter__(self) -> EmbeddedServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # --- on the node's loop -------------------------------------------------------------------

    def _config(self, port: int | None = None) -> Config:
        from ..config import load_config

        settings = dict(self.settings)
        # A caller's own ``listeners`` (several, named, TLS) are taken as given.
        listen = None if "listeners" in settings else f"{self.host}:{self.port if port is None else port}"
        return load_config(overrides=[f"{k}={v}" for k, v in settings.items()], data_dir=str(self.data_dir),
                           listen=listen)

    async def _launch(self, config: Config) -> None:
        from ..app import App

        app = App(config, embedded=True)
        app.crash_restart_hook = self._restart_soon
        self.app = app
        run = self._run = asyncio.ensure_future(app.run())
        started = asyncio.ensure_future(app.started.wait())
        try:
            await asyncio.wait({run, started}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            started.cancel()
        if not app.started.is_set():
            code = run.result()  # raises what stopped the start
            raise ServerError(f"the node ended before serving (exit code {code})")
        if "listeners" not in self.settings:
            self.port = app.bound[0][2]

    async def _shutdown(self) -> None:
        if self._restart is not None and not self._restart.done():
            await self._restart
        run, app = self._run, self.app
        if app is None or run is None:
            return
        if not run.done():
            app.request_stop()
        code = await run
        if code != 0:
            raise ServerError(f"the node's shutdown ended with exit code {code}")

    async def _abort_and_launch(self) -> None:
        if self._restart is not None and not self._restart.done() and self._restart is not asyncio.current_task():
            await self._restart  # a crash-restart fault already under way
            return
        run, app = self._run, self.app
        if app is not None:
            app.abort()
        if run is not None:
            await run  # returns at once after the abort: the ops listener and cluster parts close
        self.app = self._run = None
        await self._launch(self._config())

    def _restart_soon(self) -> None:
        """``App.crash_restart_hook``: the ``crash-restart`` fault, called on the node's loop."""
        self._restart = asyncio.ensure_future(self._abort_and_launch())

    # --- from the caller's thread -------------------------------------------------------------

    def _on_loop(self, coro: Any, timeout: float, what: str) -> None:
        loop, thread = self.loop, self._thread
        assert loop is not None and thread is not None
        if threading.current_thread() is thread:
            coro.close()
            raise ServerError(f"{what}: called on the node's own thread; use the fault handle's crash_restart")
        future: Future[None] = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            future.result(timeout)
        except FutureTimeout:
            future.cancel()
            raise ServerError(f"{what} did not finish within {timeout} s (data dir {self.data_dir})") from None
        except ServerError:
            raise
        except BaseException as exc:
            raise ServerError(f"{what} failed: {exc!r} (data dir {self.data_dir})") from exc

    def _end_thread(self, abort: bool) -> None:
        """Stop the loop (aborting a node still running) and wait, bounded, for its thread."""
        loop, thread = self.loop, self._thread
        self._thread = None
        if loop is None or thread is None:
            return
        app, run = self.app, self._run

        def finish() -> None:
            # A node still running, or one whose run failed half-way, holds its data directory
            # and sockets: abort it. One that stopped gracefully has let go of everything.
            try:
                if abort and app is not None and (run is None or not run.done() or run.cancelled()
                                                  or run.exception() is not None):
                    app.abort()
            finally:
                loop.stop()

        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(finish)
            except RuntimeError:
                pass  # the loop closed meanwhile: its thread is ending
        thread.join(_JOIN_S)
        if thread.is_alive():
            log.error("the embedded node's thread did not end", extra={"data_dir": str(self.data_dir)})
        self.app = self._run = self._restart = None
        self.loop = None
        self._faults = None


class _CurrentEngine:
    """The fault engine of whichever App the server runs now, for a transport built once."""

    def __init__(self, server: EmbeddedServer) -> None:
        self._server = server

    def _engine(self) -> FaultEngine:
        app = self._server.app
        if app is None:
            raise FaultError("the in-process server is not running")
        if app.faults is None:
            from ..faults.spec import FAULTS_OFF  # loaded with the App already

            raise FaultError(FAULTS_OFF, 404)  # what the node's /faults answers when it is off
        return app.faults

    def inject(self, body: Mapping[str, object]) -> Coroutine[Any, Any, dict[str, object]]:
        return self._engine().inject(body)

    def list(self) -> list[dict[str, object]]:
        return self._engine().list()

    def clear(self, fault_id: str | None = None) -> int:
        return self._engine().clear(fault_id)


def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
    """The node's thread: its loop until told to stop, then what ``asyncio.run`` does at its end
    (cancel what is left, close async generators and the default executor), bounded."""
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.wait(tasks, timeout=_JOIN_S))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(asyncio.wait_for(loop.shutdown_default_executor(), _JOIN_S))
        except Exception:
            log.exception("closing the embedded node's loop failed")
        finally:
            asyncio.set_event_loop(None)
            loop.close()
