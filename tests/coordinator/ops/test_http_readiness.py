"""/readyz of a running node answers 503, naming the partition, while a coordinator partition it
leads is loading, and 200 once it is loaded. The load is held back by a gate on the loader's log
replay (the node is real: App.run in this loop, its HTTP listener on http.listen)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from coordinator.app import App
from coordinator.config import load_config
from coordinator.runtime.loader import Loader
from tests.conftest import free_port


async def _get(port: int, path: str) -> tuple[int, str] | None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        reply = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body.decode()


async def _run_node(data_dir: Path, http_port: int, during: Any) -> None:
    app = App(load_config(data_dir=str(data_dir), listen=f"127.0.0.1:{free_port()}",
                          overrides=[f"http.listen=127.0.0.1:{http_port}", "offsets.topic.num.partitions=3"]))
    running = asyncio.ensure_future(app.run())
    try:
        await during(app)
    finally:
        app._stop.set()
        assert await asyncio.wait_for(running, 20) == 0


def test_readyz_is_503_while_loading_then_200(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir, http_port = tmp_path / "data", free_port()

    async def create_offsets_topic(app: App) -> None:
        app.topics.create_offsets_topic()

    async def scenario() -> None:
        # First start: the offsets topic exists afterwards, so the next start has partitions to load.
        await _run_node(data_dir, http_port, create_offsets_topic)

        gate = asyncio.Event()
        replay_log = Loader.replay_log

        async def held_back(self: Loader[Any], part: Any, offset: int) -> int:
            if part.name == "__consumer_offsets-1":
                await gate.wait()
            return await replay_log(self, part, offset)

        monkeypatch.setattr(Loader, "replay_log", held_back)

        async def check(_app: App) -> None:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            reply = await _get(http_port, "/readyz")
            while reply is None:
                assert loop.time() < deadline, "the HTTP listener never came up"
                await asyncio.sleep(0.02)
                reply = await _get(http_port, "/readyz")
            status, body = reply
            assert status == 503
            assert "coordinator partition __consumer_offsets-1 loading" in body
            assert await _get(http_port, "/healthz") == (200, "ok\n")
            gate.set()
            while (reply := await _get(http_port, "/readyz")) != (200, "ready\n"):
                assert loop.time() < deadline, f"never ready: {reply}"
                await asyncio.sleep(0.02)

        await _run_node(data_dir, http_port, check)

    asyncio.run(scenario())
