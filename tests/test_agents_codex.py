"""Agents delivered to Codex: the real `codex app-server` (from npm, `make tools`), its model a fake on loopback.

`nerve agent deliver` is a second client of the app-server the user runs: each
delivery is a `turn/start` on the configured thread, acknowledged on that
turn's `turn/completed`. The app-server is restarted between two turns: the
second turn resumes the thread (`thread/resume` after "thread not found"), and
nothing is lost or repeated.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import nerve
from enginekit import wait_for, write_instance
from fakemodel import FakeModel

from nerve_cli.ops.emit import emit_event

CODEX = Path(__file__).resolve().parents[1] / ".harnesses" / "node_modules" / ".bin" / "codex"


def _app_server(codex_home: Path, socket: Path, model: FakeModel) -> subprocess.Popen:
    assert CODEX.exists(), f"{CODEX} is missing: `make tools` installs the harnesses from npm"
    socket.unlink(missing_ok=True)
    provider = f'{{name="fake", base_url="{model.url}", wire_api="responses", env_key="FAKE_MODEL_KEY"}}'
    args = [str(CODEX), "app-server", "--listen", f"unix://{socket}", "-c", "model_provider=fake",
            "-c", f"model_providers.fake={provider}", "-c", 'model="fake-model"', "-c", 'approval_policy="never"',
            "-c", 'sandbox_mode="read-only"', "-c", "analytics.enabled=false"]
    env = {**os.environ, "CODEX_HOME": str(codex_home), "FAKE_MODEL_KEY": "x", "NO_COLOR": "1"}
    # its own process group: npm's `codex` is a node script that runs the native binary as its child
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    wait_for(socket.exists, 30, what="the codex app-server's socket")
    return proc


def _kill(server: subprocess.Popen) -> None:
    """The app-server and what it started: its process group, and any process still serving its socket (the
    native binary can leave the group npm's wrapper started)."""
    listen = server.args[server.args.index("--listen") + 1] if isinstance(server.args, list) else None
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            command = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if listen is not None and listen.encode() in command and b"app-server" in command:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


async def _start_thread(socket: Path, cwd: Path) -> str:
    from websockets.asyncio.client import unix_connect

    async with unix_connect(str(socket), uri="ws://localhost/") as ws:
        async def call(number: int, method: str, params: dict) -> dict:
            await ws.send(json.dumps({"id": number, "method": method, "params": params}))
            while True:
                answer = json.loads(await asyncio.wait_for(ws.recv(), 30))
                if answer.get("id") == number and "method" not in answer:
                    assert "error" not in answer, answer
                    return answer["result"]

        await call(0, "initialize", {"clientInfo": {"name": "test-user", "version": "1"}})
        await ws.send(json.dumps({"method": "initialized"}))
        return (await call(1, "thread/start", {"cwd": str(cwd)}))["thread"]["id"]


def _ctrl_c_as_in_a_terminal() -> None:
    # a process started with SIGINT ignored (a test runner's worker may ignore it) keeps it ignored across exec,
    # and Python then installs no KeyboardInterrupt: the SIGINT below would be lost. A terminal's default
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _acked(home: Path) -> int:
    listed = json.loads(nerve("agent", "list", "--json", home=home).stdout)["agents"]
    return listed[0]["deliveries_acked"]


@pytest.mark.timeout(180)
def test_events_become_turns_on_the_codex_thread_across_an_app_server_restart(home, tmp_path):
    # a unix socket's path has at most 107 bytes: tmp_path's is longer
    model, codex_home, socket = FakeModel(), tmp_path / "codex", Path(tempfile.mkdtemp(prefix="cx")) / "app.sock"
    codex_home.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    server = _app_server(codex_home, socket, model)
    deliverer = None
    try:
        thread = asyncio.run(_start_thread(socket, project))
        write_instance(home, f"""
agents:
  coder: {{on: [ci.done], deliver: {{codex: {{endpoint: "unix://{socket}", thread: "{thread}"}}}}}}
""", {})
        nerve("agent", "next", "coder", home=home)  # its first look (then ack nothing: no events yet)
        deliverer = subprocess.Popen([sys.executable, "-m", "nerve_cli", "agent", "deliver", "coder", "--home",
                                      str(home)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=_ctrl_c_as_in_a_terminal)
        emit_event(home, "ci.done", {"job": 1, "conclusion": "failure"})
        wait_for(lambda: _acked(home) == 1, 60, what="the first turn to complete and be acknowledged")
        _kill(server)  # the app-server restarts between turns

        server = _app_server(codex_home, socket, model)
        emit_event(home, "ci.done", {"job": 2, "conclusion": "failure"})
        wait_for(lambda: _acked(home) == 2, 60, what="the second turn, after the restart")
    finally:
        if deliverer is not None:
            deliverer.send_signal(signal.SIGINT)
            out, _ = deliverer.communicate(timeout=30)
            print(out)  # shown when the test fails
        _kill(server)
        model.close()
        socket.unlink(missing_ok=True)
        socket.parent.rmdir()
    texts = model.user_texts()
    assert len(texts) == 2, texts  # one model call per turn: nothing repeated
    assert "ci.done #1" in texts[0] and '"job":1' in texts[0] and "#2" not in texts[0]
    assert "ci.done #2" in texts[1] and '"job":2' in texts[1]
    assert "2 turns completed" in out


@pytest.mark.timeout(180)
def test_a_running_engine_delivers_the_configured_agent_itself(home, tmp_path):
    from enginekit import RunningEngine

    model, codex_home = FakeModel(), tmp_path / "codex"
    socket = Path(tempfile.mkdtemp(prefix="cx")) / "app.sock"
    codex_home.mkdir()
    (tmp_path / "project").mkdir()
    server = _app_server(codex_home, socket, model)
    try:
        thread = asyncio.run(_start_thread(socket, tmp_path / "project"))
        write_instance(home, f"""
agents:
  coder: {{on: [ci.done], start: all, deliver: {{codex: {{endpoint: "unix://{socket}", thread: "{thread}"}}}}}}
""", {})
        with RunningEngine(home) as engine:
            engine.wait_ready(groups=0)
            refused = nerve("agent", "deliver", "coder", home=home)
            assert refused.returncode != 0 and "running engine delivers agent coder" in refused.stderr
            emit_event(home, "ci.done", {"job": 3})
            wait_for(lambda: _acked(home) == 1, 60, what="the engine's turn to be acknowledged")
            engine.stop()
    finally:
        _kill(server)
        model.close()
        socket.unlink(missing_ok=True)
        socket.parent.rmdir()
    assert len(model.user_texts()) == 1 and "ci.done #1" in model.user_texts()[0]


async def _user_turn(socket: Path, cwd: Path) -> str:
    """The user's own client: a thread with one turn done (on disk, so a second client can resume it)."""
    from nerve_cli.agents.codex import Connection

    conn = await Connection.open(f"unix://{socket}")
    try:
        await conn.request("initialize", {"clientInfo": {"name": "test-user", "version": "1"}})
        await conn.notify("initialized")
        thread = (await conn.request("thread/start", {"cwd": str(cwd)}))["thread"]["id"]
        started = await conn.request("turn/start", {"threadId": thread, "input": [
            {"type": "text", "text": "the user's own turn", "text_elements": []}]})
        assert (await asyncio.wait_for(conn.turn(started["turn"]["id"]), 60)).status == "completed"
        return thread
    finally:
        await conn.close()


class _SocketServer:
    """A WebSocket server on a unix socket, run by a thread of the test: `handle` serves each connection."""

    def __init__(self, listen: Path) -> None:
        import threading

        self.listen, self._ready, self._loop = listen, threading.Event(), asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._serve(),), daemon=True)
        self._thread.start()
        assert self._ready.wait(30)

    async def handle(self, client: Any) -> None:
        raise NotImplementedError

    async def _serve(self) -> None:
        from websockets.asyncio.server import unix_serve

        self._stop = asyncio.Event()
        async with unix_serve(self.handle, str(self.listen), max_size=None):
            self._ready.set()
            await self._stop.wait()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


class _DroppingProxy(_SocketServer):
    """A proxy in front of the app-server that loses every turn/completed it carries."""

    def __init__(self, upstream: Path, listen: Path) -> None:
        self.upstream, self.dropped = upstream, 0
        super().__init__(listen)

    async def handle(self, client: Any) -> None:
        from websockets.asyncio.client import unix_connect

        async with unix_connect(str(self.upstream), uri="ws://localhost/", max_size=None) as server:
            async def up() -> None:
                async for frame in client:
                    await server.send(frame)

            async def down() -> None:
                async for frame in server:
                    if json.loads(frame).get("method") == "turn/completed":
                        self.dropped += 1
                        continue
                    await client.send(frame)

            await asyncio.wait({asyncio.ensure_future(up()), asyncio.ensure_future(down())},
                               return_when=asyncio.FIRST_COMPLETED)


@pytest.mark.timeout(180)
def test_a_turn_whose_completion_is_never_heard_is_read_from_its_thread(home, tmp_path):
    """The app-server's turn/completed lost on the way (a proxy drops it): the deliverer reads the thread's turns
    (`thread/read`) and acknowledges the delivery, instead of waiting for ever."""
    model, codex_home = FakeModel(), tmp_path / "codex"
    sockets = Path(tempfile.mkdtemp(prefix="cx"))
    codex_home.mkdir()
    (tmp_path / "project").mkdir()
    server = _app_server(codex_home, sockets / "app.sock", model)
    proxy = deliverer = None
    try:
        thread = asyncio.run(_user_turn(sockets / "app.sock", tmp_path / "project"))
        proxy = _DroppingProxy(sockets / "app.sock", sockets / "proxy.sock")
        write_instance(home, f"""
agents:
  coder: {{on: [ci.done], deliver: {{codex: {{endpoint: "unix://{sockets / 'proxy.sock'}", thread: "{thread}"}}}}}}
""", {})
        nerve("agent", "next", "coder", home=home)
        deliverer = subprocess.Popen([sys.executable, "-m", "nerve_cli", "agent", "deliver", "coder", "--home",
                                      str(home)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=_ctrl_c_as_in_a_terminal)
        emit_event(home, "ci.done", {"job": 1})
        wait_for(lambda: _acked(home) == 1, 60, what="the turn to be read from its thread and acknowledged")
        assert proxy.dropped >= 1
    finally:
        if deliverer is not None:
            deliverer.send_signal(signal.SIGINT)
            out, _ = deliverer.communicate(timeout=30)
            print(out)  # shown when the test fails
        if proxy is not None:
            proxy.close()
        _kill(server)
        model.close()
        for name in ("app.sock", "proxy.sock"):
            (sockets / name).unlink(missing_ok=True)
        sockets.rmdir()
    texts = model.user_texts()
    assert len(texts) == 2 and "ci.done #1" in texts[1], texts  # the user's turn, then the delivery's, once
    assert "its turn/completed was not heard" in out and "1 turn completed" in out


class _AnsweringServer(_SocketServer):
    """A stand-in app-server that answers every request with an empty result."""

    async def handle(self, client: Any) -> None:
        async for frame in client:
            message = json.loads(frame)
            if "id" in message and "method" in message:
                await client.send(json.dumps({"id": message["id"], "result": {}}))


@pytest.mark.timeout(120)
def test_a_deliverer_that_stops_on_an_error_is_started_again_by_the_engine(home, tmp_path):
    """Its agents.db unreadable, the engine's Codex deliverer ends on the error: the engine says so and starts
    it again a second later (and again), rather than leaving the agent undelivered until the next reload."""
    from enginekit import RunningEngine

    sockets = Path(tempfile.mkdtemp(prefix="cx"))
    server = _AnsweringServer(sockets / "app.sock")
    try:
        write_instance(home, f"""
agents:
  coder: {{on: [ci.done], deliver: {{codex: {{endpoint: "unix://{sockets / 'app.sock'}", thread: "t-1"}}}}}}
""", {})
        (home / "data").mkdir(exist_ok=True)
        (home / "data" / "agents.db").write_bytes(b"not a database, " * 64)
        with RunningEngine(home) as engine:
            engine.wait_ready(groups=0)
            wait_for(lambda: engine.output().count("codex delivery stopped") >= 2, 30,
                     what="the deliverer ended on its error twice: started again after the first")
            engine.stop()
    finally:
        server.close()
        (sockets / "app.sock").unlink(missing_ok=True)
        sockets.rmdir()
