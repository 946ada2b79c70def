"""`nerve workflow run`: start a thread and follow it to its end.

Through the running engine (control socket `start_thread`, then the run's log
rows are polled every ~100 ms), or standalone when no engine runs: this
process holds the instance lock and runs a WorkflowManager with its own
LogStore, printing rounds as they happen.
"""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nerve_cli.config.load import load_config
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.instance.git import person
from nerve_cli.ops.client import engine_running, request
from nerve_cli.roles.llm_env import LlmEnv, llm_env, mismatch
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import LogStore, query_logs
from nerve_cli.vocab.states import ThreadStatus

END_TYPES = tuple(s.value for s in ThreadStatus if not s.live)
STOP_TYPES = (*END_TYPES, "waiting")  # following a thread stops when it ends or waits (a person, an event)
OnEvent = Callable[[str, str, dict], None]  # (run_id, type, payload)
Report = Callable[[str, str], None]
POLL = 0.1
ENGINE_CHECK = 2.0


def run_workflow(home: Path, name: str, prompt: str, max_rounds: int | None,
                 on_event: OnEvent, report: Report) -> dict[str, Any]:
    """Run one thread to its end, or until it waits for a person; returns {"run_id", "status", "reason", "via"}."""
    if engine_running(home):
        origin = {"kind": "cli", "by": person(home), "via": "nerve workflow run"}  # who started it (self_approval)
        answer = request(home, "start_thread", workflow=name, prompt=prompt, max_rounds=max_rounds, origin=origin)
        differs = _llm_differs(home, name, answer.get("llm"))
        if differs:
            report("warn", differs)
        try:
            end = follow_run(home, answer["run_id"], on_event)
        except KeyboardInterrupt:  # Ctrl-C stops the following, not the thread: the engine runs it
            end = {"run_id": answer["run_id"], "status": "interrupted",
                   "reason": "stopped following it; the thread goes on in the engine"}
        return {**end, "via": "engine"}
    return {**run_standalone(home, name, prompt, max_rounds, on_event, report), "via": "standalone"}


def llm_environments(home: Path) -> tuple[LlmEnv, LlmEnv | None]:
    """(this process's llm environment, the running engine's or None when none runs or it does not say)."""
    here = llm_env()
    if not engine_running(home):
        return here, None
    try:
        engine = request(home, "status").get("llm")
    except NerveError:
        return here, None
    return here, LlmEnv.from_json(engine) if engine else None


def _llm_differs(home: Path, name: str, engine: dict[str, Any] | None) -> str | None:
    """The engine's llm environment against this process's, for a workflow whose file builds llm roles."""
    if not engine:
        return None
    try:
        if "llm_role" not in Layout(Path(home)).workflow_file(name).read_text(encoding="utf-8"):
            return None  # its roles call no model through llm: the folders do not matter
    except OSError:
        pass
    return mismatch(LlmEnv.from_json(engine), llm_env(), name)


def follow_run(home: Path, run_id: str, on_event: OnEvent, *, poll: float = POLL) -> dict[str, Any]:
    """Print a run's rows as the engine writes them, until its end row."""
    path, after, checked = Layout(Path(home)).logs_db, 0, time.monotonic()
    while True:
        for row in query_logs(path, source="workflow", ref=run_id, after_id=after):
            after = row["id"]
            payload = row["payload"] or {}
            on_event(run_id, row["type"], payload)
            if row["type"] in STOP_TYPES:
                return {"run_id": run_id, "status": row["type"], "reason": payload.get("reason")}
        if time.monotonic() - checked > ENGINE_CHECK:
            checked = time.monotonic()
            if not engine_running(home):
                raise NerveError(f"the engine stopped while {run_id} was running; it resumes or is marked "
                                 f"crashed at the next start (see `nerve thread show {run_id}`)")
        time.sleep(poll)


def run_standalone(home: Path, name: str, prompt: str, max_rounds: int | None,
                   on_event: OnEvent, report: Report) -> dict[str, Any]:
    config = load_config(home)
    with InstanceLock(home, f"nerve workflow run {name}"):
        return asyncio.run(_standalone(home, config, name, prompt, max_rounds, on_event, report))


async def _standalone(home: Path, config: Any, name: str, prompt: str, max_rounds: int | None,
                      on_event: OnEvent, report: Report) -> dict[str, Any]:
    # only the standalone run needs the manager (and its process handling); a run through the engine does not
    from nerve_cli.kernel.workflows.manager import WorkflowManager

    loop = asyncio.get_running_loop()
    done: asyncio.Future[dict[str, Any]] = loop.create_future()
    mine: list[str] = []

    def listener(run_id: str, workflow: str, type_: str, payload: dict) -> None:
        if not mine:
            mine.append(run_id)  # the first event is our `queued`: nothing else runs here
        if run_id != mine[0]:
            return
        on_event(run_id, type_, payload)
        if type_ in STOP_TYPES and not done.done():
            done.set_result({"run_id": run_id, "status": type_, "reason": payload.get("reason")})

    logs = LogStore(Layout(home).logs_db)
    manager = WorkflowManager(home, config, logs, report, idle_timeout=3600)
    manager.add_listener(listener)
    loop.add_signal_handler(signal.SIGINT, _interrupt, done, mine)
    loop.add_signal_handler(signal.SIGTERM, _interrupt, done, mine)
    try:
        manager.launch(name, prompt, max_rounds, {"kind": "cli", "by": "nerve workflow run"})
        result = await done
        await manager.stop(0.0 if result.get("status") == "interrupted" else 5.0,
                           reason="interrupted: nerve workflow run was stopped")
        return result
    finally:
        logs.close()


def _interrupt(done: asyncio.Future, mine: list[str]) -> None:
    if not done.done():
        done.set_result({"run_id": mine[0] if mine else None, "status": "interrupted",
                         "reason": "stopped by a signal"})
