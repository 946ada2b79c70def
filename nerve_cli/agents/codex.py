"""Nerve as a second client of the user's `codex app-server`: an agent's deliveries become turns on its thread.

`agents.NAME.deliver.codex: {endpoint, thread}` names the app-server
(`codex app-server --listen unix://PATH`, or a loopback `ws://127.0.0.1:PORT`)
and the thread the user works in. The protocol, as the app-server's own schema
(`codex app-server generate-json-schema`) has it: JSON-RPC 2.0 without the
`"jsonrpc"` member, one message per WebSocket text frame (also over the unix
socket). For each delivery:

1. `initialize {clientInfo}` → `initialized` → `thread/resume {threadId}` (once per connection: a client
   hears a thread's notifications once it subscribed to it, which resuming does);
2. `turn/start {threadId, input: [{type: "text", text}]}` with the delivery as
   the text a model reads (agents/text.py); an answer "thread not found" (the
   app-server has not loaded the thread since it started) → `thread/resume
   {threadId}`, then `turn/start` once more;
3. the delivery is acknowledged when `turn/completed` arrives for that turn
   with status `completed`, or when the thread's turns (`thread/read`, looked
   at while it has not come: after 5 s, then doubling to a minute) say so (a
   thread that never had a turn cannot be resumed, so no turn notification
   reaches a second client: its first turn counts as done when the thread goes
   idle, and the thread is resumed after it). A turn that ends `failed` or
   `interrupted` leaves it pending: it is handed again (same id) after a pause
   that doubles up to `RETRY_MAX`.

A connection that breaks (an app-server restart) is opened again with a
back-off; a delivery whose turn had not completed is still pending and is
handed again, so a restart between turns loses nothing and repeats nothing.
Requests the app-server sends its clients (approvals) are answered "not
handled here": they belong to the user's own client.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nerve_cli import __version__
from nerve_cli.agents.shared import SharedWatch
from nerve_cli.agents.text import delivery_text
from nerve_cli.agents.watch import Waiter
from nerve_cli.store.inbox import Delivery, Inbox, watched_paths

log = logging.getLogger(__name__)

CONNECT_BACKOFF = (0.2, 5.0)  # first and longest pause before connecting again
RETRY_FIRST, RETRY_MAX = 5.0, 300.0  # after a turn that did not complete
REQUEST_TIMEOUT = 30.0
IDLE_LOOK = 1.0  # seconds between looks at the inbox while nothing changes (a change wakes it at once)
NOT_HANDLED = -32601
TURN_LOOK = (5.0, 60.0)  # seconds without a turn's turn/completed before its thread is read, doubling to the most
TURN_ENDED = ("completed", "failed", "interrupted")


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (code {code})")
        self.code, self.message = code, message


class Disconnected(Exception):
    """The app-server's connection closed."""


@dataclass
class TurnOutcome:
    turn: str
    status: str  # completed | failed | interrupted
    error: Any = None


class Connection:
    """One WebSocket connection to the app-server, its answers matched to requests by id."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self._ids = itertools.count(1)
        self._answers: dict[int, asyncio.Future] = {}
        self._turns: dict[str, asyncio.Future] = {}
        self.idle: dict[str, asyncio.Event] = {}  # thread id → set when it goes idle (thread/status/changed)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        self.closed = asyncio.Event()

    @classmethod
    async def open(cls, endpoint: str) -> "Connection":
        from websockets.asyncio.client import connect, unix_connect  # only an agent delivered to Codex needs it

        limits: dict[str, Any] = {"max_size": 64 * 1024 * 1024, "open_timeout": 10, "ping_interval": 20}
        if endpoint.startswith("unix://"):
            ws = await unix_connect(endpoint[len("unix://"):], uri="ws://localhost/", **limits)
        else:
            ws = await connect(endpoint, **limits)
        return cls(ws)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        number = next(self._ids)
        answer = self._answers[number] = asyncio.get_running_loop().create_future()
        await self._send({"id": number, "method": method, "params": params})
        try:
            return await asyncio.wait_for(answer, REQUEST_TIMEOUT)
        finally:
            self._answers.pop(number, None)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        await self._send({"method": method, **({"params": params} if params is not None else {})})

    def turn(self, turn_id: str) -> asyncio.Future:
        """Resolves to the TurnOutcome of `turn_id` (its turn/completed may come before turn/start's answer)."""
        return self._turns.setdefault(turn_id, asyncio.get_running_loop().create_future())

    async def _send(self, message: dict[str, Any]) -> None:
        if self.closed.is_set():
            raise Disconnected("the app-server's connection is closed")
        try:
            await self.ws.send(json.dumps(message))
        except Exception as exc:  # websockets' ConnectionClosed and OS errors alike: the connection is gone
            raise Disconnected(str(exc)) from None

    async def _read(self) -> None:
        try:
            async for frame in self.ws:
                try:
                    message = json.loads(frame)
                except ValueError:
                    log.warning("codex app-server sent a frame that is not JSON: %.200s", frame)
                    continue
                if isinstance(message, dict):
                    await self._take(message)
        except Exception as exc:  # the connection broke
            log.info("codex app-server connection closed: %s", exc)
        finally:
            self.closed.set()
            for future in [*self._answers.values(), *self._turns.values()]:
                if not future.done():
                    future.set_exception(Disconnected("the app-server's connection closed"))

    async def _take(self, message: dict[str, Any]) -> None:
        method, number = message.get("method"), message.get("id")
        if method is None and number is not None:  # an answer
            future = self._answers.get(number) if isinstance(number, int) else None
            if future is not None and not future.done():
                error = message.get("error")
                if isinstance(error, dict):
                    future.set_exception(RpcError(int(error.get("code", 0)), str(error.get("message", ""))))
                else:
                    future.set_result(message.get("result"))
        elif method is not None and number is not None:  # a request to its clients: the user's client answers it
            await self._send({"id": number, "error": {"code": NOT_HANDLED, "message": "nerve does not handle "
                                                      f"{method}; answer it in your Codex client"}})
        elif method == "thread/status/changed":
            params = message.get("params") or {}
            status = params.get("status") if isinstance(params, dict) else None
            if isinstance(status, dict) and status.get("type") == "idle" and params.get("threadId") in self.idle:
                self.idle[params["threadId"]].set()
        elif method == "turn/completed":
            turn = (message.get("params") or {}).get("turn") or {}
            if isinstance(turn, dict) and isinstance(turn.get("id"), str):
                future = self.turn(turn["id"])
                if not future.done():
                    future.set_result(TurnOutcome(turn["id"], str(turn.get("status")), turn.get("error")))

    async def close(self) -> None:
        self._reader.cancel()
        try:
            await self.ws.close()
        except Exception:  # closing a broken connection: nothing left to tell
            pass


class CodexDeliverer:
    """Hands one agent's deliveries to its Codex thread, one turn at a time, until `stop` is set."""

    def __init__(self, data: Path, waiter: Callable[[], Waiter], endpoint: str, thread: str,
                 report: Callable[[str, str], None] | None = None) -> None:
        self.data, self.waiter, self.endpoint, self.thread = Path(data), waiter, endpoint, thread
        self.report = report or (lambda level, text: getattr(log, "warning" if level == "warn" else "info")(text))
        self.shared = SharedWatch()
        self.turns = 0  # turns completed and acknowledged (for status and the tests)
        self.subscribed = False

    @property
    def session(self) -> str:
        return f"codex:{self.thread}"

    async def run(self, stop: asyncio.Event) -> None:
        pause = CONNECT_BACKOFF[0]
        while not stop.is_set():
            try:
                conn = await Connection.open(self.endpoint)
            except (OSError, asyncio.TimeoutError, Exception) as exc:  # refused, missing socket, handshake
                self.report("warn", f"codex app-server {self.endpoint}: cannot connect ({exc}); again in {pause:g}s")
                await _sleep(stop, pause)
                pause = min(pause * 2, CONNECT_BACKOFF[1])
                continue
            pause = CONNECT_BACKOFF[0]
            try:
                await conn.request("initialize", {"clientInfo": {"name": "nerve", "title": "Nerve",
                                                                 "version": __version__}})
                await conn.notify("initialized")
                # a second client hears a thread's turns once subscribed: resuming a thread subscribes to it
                self.subscribed = await self._resume(conn)
                await self._serve(conn, stop)
            except (Disconnected, RpcError, asyncio.TimeoutError) as exc:
                self.report("warn", f"codex app-server {self.endpoint}: {exc}; connecting again")
                await _sleep(stop, pause)
            finally:
                await conn.close()

    async def _serve(self, conn: Connection, stop: asyncio.Event) -> None:
        retry = RETRY_FIRST
        inbox = await asyncio.to_thread(Inbox, self.data)
        try:
            while not stop.is_set():
                waiter = self.waiter()
                taken = await asyncio.to_thread(waiter.take, inbox, session=self.session, via="codex")
                found = taken.delivery
                if found is None:
                    await self._quiet(conn, stop, watched_paths(self.data, waiter.sources))
                    continue
                outcome = await self._turn(conn, found)
                if outcome.status == "completed":
                    await asyncio.to_thread(inbox.ack, waiter.name, [found.id], "codex")
                    self.turns += 1
                    retry = RETRY_FIRST
                    continue
                self.report("warn", f"codex turn {outcome.turn} for delivery {found.id} ended {outcome.status}: "
                                    f"{outcome.error}; it is handed again in {retry:g}s")
                await _sleep(stop, retry)
                retry = min(retry * 2, RETRY_MAX)
        finally:
            inbox.close()

    async def _quiet(self, conn: Connection, stop: asyncio.Event, paths: list[Path]) -> None:
        """Until a database commits, the connection closes, `stop` is set, or IDLE_LOOK passes."""
        change = asyncio.ensure_future(self.shared.wait_change(paths, IDLE_LOOK))
        closed = asyncio.ensure_future(conn.closed.wait())
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({change, closed, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (change, closed, stopped):
                task.cancel()
        if conn.closed.is_set():
            raise Disconnected("the app-server's connection closed")

    async def _resume(self, conn: Connection) -> bool:
        """Subscribe to the thread's turns; False when the app-server cannot resume it (a thread that never
        had a turn has nothing on disk to resume: its turns are then followed by its idle status)."""
        try:
            await conn.request("thread/resume", {"threadId": self.thread, "excludeTurns": True})
            return True
        except RpcError as exc:
            self.report("info", f"codex thread {self.thread}: {exc.message}; following its status instead")
            return False

    async def _turn(self, conn: Connection, found: Delivery) -> TurnOutcome:
        params = {"threadId": self.thread, "input": [{"type": "text", "text": delivery_text(found),
                                                       "text_elements": []}]}
        try:
            started = await conn.request("turn/start", params)
        except RpcError as exc:
            if "not found" not in exc.message.lower():
                raise
            await conn.request("thread/resume", {"threadId": self.thread})
            started = await conn.request("turn/start", params)
        turn_id = (started or {}).get("turn", {}).get("id") if isinstance(started, dict) else None
        if not isinstance(turn_id, str):
            raise RpcError(0, f"turn/start answered no turn id: {str(started)[:200]}")
        completed = asyncio.ensure_future(conn.turn(turn_id))
        if self.subscribed:
            return await self._completion(conn, turn_id, completed)
        idle = asyncio.ensure_future(conn.idle.setdefault(self.thread, asyncio.Event()).wait())
        await asyncio.wait({completed, idle}, return_when=asyncio.FIRST_COMPLETED)
        idle.cancel()
        if completed.done():
            return completed.result()
        completed.cancel()
        conn.idle[self.thread].clear()
        self.subscribed = await self._resume(conn)  # it has a turn on disk now: hear the next ones whole
        return TurnOutcome(turn_id, "completed")

    async def _completion(self, conn: Connection, turn_id: str, completed: asyncio.Future) -> TurnOutcome:
        """The turn's outcome from its turn/completed, or from the thread's turns (`thread/read`) when a look
        passes without it (TURN_LOOK, doubling): a notification lost on the way must not hold the deliveries
        for ever."""
        look, said = TURN_LOOK[0], False
        while True:
            done, _ = await asyncio.wait({completed}, timeout=look)
            if done:
                return completed.result()
            look = min(look * 2, TURN_LOOK[1])
            try:
                read = await conn.request("thread/read", {"threadId": self.thread, "includeTurns": True})
            except RpcError as exc:  # looked at again later; its notification may still come
                if not said:
                    self.report("info", f"codex thread {self.thread}: cannot read its turns ({exc.message}); "
                                        f"waiting for turn {turn_id}'s end")
                said = True
                continue
            turns = read.get("thread", {}).get("turns") if isinstance(read, dict) else None
            for turn in turns if isinstance(turns, list) else []:
                if isinstance(turn, dict) and turn.get("id") == turn_id and turn.get("status") in TURN_ENDED:
                    self.report("info", f"codex turn {turn_id} ended {turn['status']}, read from its thread: "
                                        "its turn/completed was not heard")
                    completed.cancel()
                    return TurnOutcome(turn_id, str(turn["status"]), turn.get("error"))


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except asyncio.TimeoutError:
        pass
