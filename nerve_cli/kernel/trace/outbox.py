"""Spans on their way out of the kernel: batched, and written down a pipe to the exporter process.

The kernel's part of a span's export is a tuple appended to a list; every `FLUSH` seconds (or `BATCH` items)
the list is one `marshal` frame written to the exporter process's stdin (a non-blocking pipe: the loop never
waits for it). The exporter process (`exporter`, `python -m nerve_cli.kernel.trace.exporter`) is started with
the engine in a session of its own (a terminal's Ctrl-C is the kernel's), makes the SDK's spans, encodes and
exports them. It is supervised here:

- at stop, what is buffered is written and the pipe closed: the exporter exports all it has, then exits
  (`close`; waited for up to twice the export timeout, then killed);
- when it dies, the console says so once, with its exit code and last line of stderr, and it is started again
  after a back-off (1 s, doubling to 60 s; a crash loop is said once, until one runs `STEADY` seconds); the
  engine runs on. Meanwhile up to `QUEUE` items wait here, and those beyond are dropped;
- what is dropped (here: no exporter, or its pipe full; there: its queue full while the collector is down) is
  counted, said once when it starts, and in all at stop;
- when the engine dies (even SIGKILL), the pipe's write end closes with it: the exporter reads the end of its
  input, exports what it has, and exits (no orphan).
"""

from __future__ import annotations

import asyncio
import marshal
import os
import sys
from collections import deque
from typing import Any

import orjson

from nerve_cli.kernel.core.report import Report

EXPORTER_MODULE = "nerve_cli.kernel.trace.exporter"
BATCH = 512  # items written at once
FLUSH = 0.1  # seconds an item waits for its batch at most
QUEUE = 4096  # items kept while no exporter runs (starting, or started again after it died); beyond: dropped
PIPE_BUFFER = 4 << 20  # bytes waiting for the exporter to read them beyond which a batch is dropped
RESTART_BACKOFF = (1.0, 60.0)  # seconds before a dead exporter is started again: first, most
STEADY = 60.0  # an exporter that ran this long before dying is started again after the first back-off


def export_timeout() -> float:
    """The OTLP exporters' timeout (seconds, `OTEL_EXPORTER_OTLP_TIMEOUT`, 10 by default)."""
    try:
        return float(os.environ.get("OTEL_EXPORTER_OTLP_TIMEOUT") or 10)
    except ValueError:
        return 10.0


class Outbox:
    def __init__(self, endpoint: str | None, host: str, home: str, report: Report) -> None:
        self.argv = [sys.executable, "-m", EXPORTER_MODULE,
                     orjson.dumps({"endpoint": endpoint, "host": host, "home": home}).decode()]
        self.report = report
        self.items: list[tuple[Any, ...]] = []
        self.loop: asyncio.AbstractEventLoop | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.task: asyncio.Task | None = None
        self.closing = False
        self.written = 0  # items handed to an exporter process
        self.dropped_here = 0
        self.dropped_there = 0  # by exporter processes that ended
        self.dropped_now = 0  # by the running one (it reports its count)
        self.exported_there = 0  # taken by the collector, through exporter processes that ended
        self.exported_now = 0
        self.deaths = 0
        self.crashing = False  # an exporter ended and none has run STEADY seconds since
        self.dropping = False  # said so: until a batch goes through again

    @property
    def dropped(self) -> int:
        return self.dropped_here + self.dropped_there + self.dropped_now

    @property
    def exported(self) -> int:
        return self.exported_there + self.exported_now

    @property
    def pid(self) -> int | None:
        process = self.process
        return process.pid if process is not None and process.returncode is None else None

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.task = self.loop.create_task(self._supervise())

    def add(self, item: tuple[Any, ...]) -> None:
        """An ended span or a log record (see `spans`), sent with the next batch."""
        items = self.items
        items.append(item)
        if len(items) >= BATCH:
            self.flush()
        elif self.timer is None and self.loop is not None:
            self.timer = self.loop.call_later(FLUSH, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        stdin = self._stdin()
        if stdin is None:  # no exporter now: keep the newest QUEUE items for the next one
            if len(self.items) > QUEUE:
                self._drop(len(self.items) - QUEUE, f"no exporter process is running and {QUEUE:,} are waiting")
                del self.items[:len(self.items) - QUEUE]
            return
        items, self.items = self.items, []
        if not items:
            return
        if stdin.transport.get_write_buffer_size() > PIPE_BUFFER:
            self._drop(len(items), "the exporter process is not reading its pipe")
            return
        try:
            frame = marshal.dumps(items)
        except ValueError:  # an attribute marshal cannot write (the kernel's are JSON values): drop that one
            kept = [item for item in items if _marshals(item)]
            self._drop(len(items) - len(kept), "a span had an attribute that is not a plain value")
            items, frame = kept, marshal.dumps(kept)
        stdin.write(len(frame).to_bytes(4, "big") + frame)
        self.written += len(items)
        self.dropping = False

    def _stdin(self) -> asyncio.StreamWriter | None:
        process = self.process
        if process is None or process.returncode is not None or process.stdin is None or process.stdin.is_closing():
            return None
        return process.stdin

    def _drop(self, count: int, why: str) -> None:
        self.dropped_here += count
        if not self.dropping:
            self.dropping = True
            self.report("warn", f"traces: {why}, so spans and log records are dropped ({self.dropped:,} so far; "
                                "said once, counted at stop)")

    async def _supervise(self) -> None:
        assert self.loop is not None
        delay = RESTART_BACKOFF[0]
        while not self.closing:
            started = self.loop.time()
            stderr: deque[str] = deque(maxlen=5)
            try:
                process = await asyncio.create_subprocess_exec(
                    *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, start_new_session=True)
            except OSError as exc:
                code: int | str = str(exc)
                pid = None
            else:
                self.process, pid = process, process.pid
                self.flush()  # what waited for it
                assert process.stdout is not None and process.stderr is not None
                await asyncio.gather(self._read_reports(process.stdout), _read_tail(process.stderr, stderr))
                code = await process.wait()
                self.dropped_there += self.dropped_now
                self.exported_there += self.exported_now
                self.dropped_now = self.exported_now = 0
            if self.closing:
                return
            self.deaths += 1
            ran = self.loop.time() - started
            steady = ran > STEADY
            if steady or not self.crashing:  # a crash loop is said once: its count is in status' traces
                said = f": {stderr[-1]}" if stderr else ""
                self.report("warn", f"traces: the exporter process{f' (pid {pid})' if pid else ''} ended ({code})"
                                    f"{said}; the engine runs on; starting it again in {delay:g}s, doubling while it "
                                    f"keeps ending (said once; spans meanwhile wait, up to {QUEUE:,}, and beyond are "
                                    "dropped)")
            self.crashing = True
            await asyncio.sleep(delay)
            delay = RESTART_BACKOFF[0] if steady else min(delay * 2, RESTART_BACKOFF[1])

    async def _read_reports(self, stdout: asyncio.StreamReader) -> None:
        """The exporter's lines: what to say on the console (an outage, its end), and its count of drops."""
        async for line in stdout:
            try:
                said = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            if "dropped" in said:
                self.dropped_now, self.exported_now = int(said["dropped"]), int(said.get("exported", 0))
            if "line" in said:
                self.report(str(said.get("level", "info")), str(said["line"]))

    def status(self) -> dict[str, Any]:
        """For `nerve status`: the exporter process now, and the counts since the engine started."""
        return {"exporter_pid": self.pid, "exporter_restarts": self.deaths, "sent": self.written,
                "exported": self.exported, "dropped": self.dropped, "waiting": len(self.items)}

    async def close(self) -> None:
        """Send what is buffered and let the exporter export it all and exit: within twice the export timeout
        (one for spans, one for log records), else it is killed."""
        self.closing = True
        self.flush()
        stdin = self._stdin()
        process = self.process
        if stdin is not None:
            stdin.close()  # the exporter reads its input's end once it has read every frame before it
        if process is not None and self.task is not None and not self.task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.task), 2 * export_timeout() + 5)
            except asyncio.TimeoutError:
                self.report("warn", f"traces: the exporter process (pid {process.pid}) did not finish its last "
                                    "export in time; stopped")
                process.kill()
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except asyncio.CancelledError:
                pass
        self.dropped_here += len(self.items)
        self.items = []
        if self.dropped:
            self.report("warn", f"traces: {self.dropped:,} spans and log records were dropped in all "
                                f"({self.written:,} handed to the exporter)")


async def _read_tail(stream: asyncio.StreamReader, tail: deque[str]) -> None:
    async for line in stream:
        text = line.decode(errors="replace").strip()
        if text:
            tail.append(text)


def _marshals(item: tuple[Any, ...]) -> bool:
    try:
        marshal.dumps(item)
    except ValueError:
        return False
    return True
