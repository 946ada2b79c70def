"""The workflow worker: `python -m nerve_cli.worker workflow --name W --home H`.

One process per workflow kind runs that workflow's threads as asyncio tasks
(the kernel never sends more than `concurrency` at once). Protocol lines go to
the real stdout only; `print()` in user code goes to stderr.

- Start-up: import workflows/W.py. If it does not load, send
  `Ready(failed={W: ErrorInfo(...)})` and exit with code 3: the kernel fails
  the threads it meant to run with that reason (and does not respawn in a loop).
- ThreadStart: run (or resume) the thread from the given chain. Each new
  message is sent as ThreadMessage(seq) and the thread waits for the kernel's
  Ack(seq) — the message is on disk — before its next step. ThreadEnd closes it
  (status `waiting` when a role asked a person: the task ends, the slot is free).
- ThreadCancel: cancel that thread's task; no tool call of it starts any more (`automaton.context.Halt`),
  and once those already running have returned it ends `failed` with "cancelled: <reason>".
- Shutdown or EOF on stdin (the kernel is gone or stopping us): cancel what is
  left and exit 0. The kernel lets threads finish before it asks, so whatever is
  still running here cannot be acknowledged any more.
- SIGINT is ignored (a terminal's Ctrl-C is the kernel's to handle); SIGTERM ends us.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import sys
from pathlib import Path
from typing import Any

from nerve_cli.automaton.context import Halt, ThreadInfo, enter_thread
from nerve_cli.automaton.load import WorkflowLoadError
from nerve_cli.automaton.model import WorkflowDefinition, WorkflowMessage
from nerve_cli.automaton.thread import FAILED, ThreadContext, run_thread
from nerve_cli.roles.llm_log import LOG
from nerve_cli.wire import containment, protocol
from nerve_cli.worker.definitions import load_definition
from nerve_cli.worker.stdio import ProtocolReader, protocol_reader, take_protocol_fds

LOAD_FAILED_EXIT = 3


class Output:
    """Writes protocol lines to the original stdout fd, whole lines, in order."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def send(self, message: protocol.Message) -> None:
        data = memoryview(message.encode())
        while data:
            written = os.write(self.fd, data)
            data = data[written:]


class Runtime:
    def __init__(self, name: str, home: Path, out: Output, definition: WorkflowDefinition[Any]) -> None:
        self.name = name
        self.home = home
        self.out = out
        self.definition = definition
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self.halts: dict[str, Halt] = {}  # each running thread's cancel, as its tool calls see it
        self.acks: dict[tuple[str, int], asyncio.Future[None]] = {}
        self.emits: dict[tuple[str, int], asyncio.Future[protocol.EmitDone]] = {}
        self.requests = 0
        self.ctx = ThreadContext(source=(home / "workflows" / f"{name}.py").resolve(), root=home.resolve())

    async def serve(self, reader: ProtocolReader) -> None:
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # a line over the stream limit: skip it
                print(f"workflow worker {self.name}: dropped an over-long line from the kernel", file=sys.stderr)
                continue
            if not line:  # EOF with no Shutdown read first: the kernel is gone
                containment.kernel_gone()
                break
            message = protocol.decode(line)
            if isinstance(message, protocol.Shutdown):
                break
            self.handle(message)
        await self.cancel_all()

    def handle(self, message: protocol.Message | protocol.Malformed) -> None:
        if isinstance(message, protocol.ThreadStart):
            self.start(message)
        elif isinstance(message, protocol.Ack):
            future = self.acks.pop((message.run_id, message.seq), None)
            if future is not None and not future.done():
                future.set_result(None)
        elif isinstance(message, protocol.ThreadCancel):
            task = self.tasks.get(message.run_id)
            if task is not None:
                self.halts[message.run_id].cancel(message.reason)
                task.cancel(message.reason)
        elif isinstance(message, protocol.EmitDone):
            answer = self.emits.pop((message.run_id, message.request), None)
            if answer is not None and not answer.done():
                answer.set_result(message)
        else:
            print(f"workflow worker {self.name}: ignored {message!r:.200}", file=sys.stderr)

    def start(self, message: protocol.ThreadStart) -> None:
        if message.run_id in self.tasks:
            print(f"workflow worker {self.name}: {message.run_id} is already running", file=sys.stderr)
            return
        halt = Halt()
        task = asyncio.get_running_loop().create_task(self.thread(message, halt))
        self.tasks[message.run_id], self.halts[message.run_id] = task, halt
        run_id = message.run_id
        task.add_done_callback(lambda _t: (self.tasks.pop(run_id, None), self.halts.pop(run_id, None)))

    async def thread(self, start: protocol.ThreadStart, halt: Halt) -> None:
        run_id = start.run_id
        try:
            if start.workflow != self.name:
                raise ValueError(f"this worker runs workflow {self.name!r}, not {start.workflow!r}")
            chain = [WorkflowMessage.from_dict(m) for m in start.messages]
        except ValueError as exc:
            self.out.send(protocol.ThreadEnd(run_id, FAILED, f"bad thread_start: {exc}"))
            return

        async def persist(seq: int, message: WorkflowMessage) -> None:
            future = asyncio.get_running_loop().create_future()
            self.acks[(run_id, seq)] = future
            self.out.send(protocol.ThreadMessage(run_id, seq, message.to_dict()))
            await future

        def retried(role: str, attempt: int, attempts: int, reason: str, failure: Any, delay: float) -> None:
            error = failure.to_dict() if failure is not None else None
            self.out.send(protocol.RoleFailed(run_id, role, attempt, attempts, reason, round(delay, 3), error))

        ctx = dataclasses.replace(self.ctx, role_timeout=start.role_timeout, role_retries=start.role_retries,
                                  role_backoff=start.role_backoff, on_retry=retried)
        enter_thread(ThreadInfo(run_id, start.workflow, start.model, start.system, home=self.home,
                                emit=lambda channel, payload, key: self.emit(run_id, channel, payload, key),
                                halt=halt))
        try:
            outcome = await run_thread(self.definition, chain, persist, ctx)
        except asyncio.CancelledError as exc:
            reason = exc.args[0] if exc.args else "cancelled"
            halt.cancel(reason)  # a worker stopping cancels its tasks without a ThreadCancel
            running = halt.running()
            if running:  # calls in threads of their own run on: the thread has stopped once they return
                await halt.idle()
                reason += f" (after its running tool call {', '.join(running)} returned)"
            self.out.send(protocol.ThreadEnd(run_id, FAILED, f"cancelled: {reason}"))
            raise
        except ValueError as exc:  # a chain the loop cannot run (e.g. bad maxRounds)
            self.out.send(protocol.ThreadEnd(run_id, FAILED, f"bad thread_start: {exc}"))
            return
        error = outcome.error.to_dict() if outcome.error else None
        self.out.send(protocol.ThreadEnd(run_id, outcome.status, outcome.reason, error))

    async def emit(self, run_id: str, channel: str, payload: Any, key: str | None) -> dict[str, Any]:
        """Ask the kernel to store an event (a role's `emit` tool); its answer, or ValueError why not."""
        self.requests += 1
        answer = asyncio.get_running_loop().create_future()
        self.emits[(run_id, self.requests)] = answer
        self.out.send(protocol.ThreadEmit(run_id, self.requests, channel, payload, key))
        done = await answer
        if done.error is not None:
            raise ValueError(done.error)
        return {"channel": channel, "event_id": done.event_id, "duplicate": done.duplicate,
                "triggered": list(done.triggered)}

    async def cancel_all(self) -> None:
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel("worker stopping")
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _main(name: str, home: Path, out: Output, input_fd: int) -> int:
    try:
        definition = load_definition(home, name)
    except WorkflowLoadError as exc:
        f = exc.failure
        info = protocol.ErrorInfo(f.type, f.message, f.traceback, f.file, f.line)
        out.send(protocol.Ready(os.getpid(), [], {name: info}))
        return LOAD_FAILED_EXIT
    for role in definition.roles.values():  # e.g. llm_role imports llm here, not inside a role_timeout
        warm_up = getattr(role, "warm_up", None)
        if callable(warm_up):
            warm_up()
    runtime = Runtime(name, home, out, definition)
    reader = await protocol_reader(input_fd)
    out.send(protocol.Ready(os.getpid(), [name]))
    await runtime.serve(reader)
    LOG.flush()  # llm's copies of the model calls made here (a fork's exit skips atexit)
    return 0


def main(args: Any) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    fds = take_protocol_fds()  # role code never sees the protocol pipes: it prints to stderr, reads /dev/null
    out = Output(fds.write)
    try:
        return asyncio.run(_main(args.name, Path(args.home), out, fds.read))
    except BrokenPipeError:  # the kernel is gone
        return 0
