"""Model-backed rounds: what a round through `llm_role` costs beyond the model call itself.

Two workflows run in this process, one after the other, each a WorkflowManager
(with its own LogStore on a temp instance) driving a real workflow worker:

- plain: two roles that return a RoleResult at once (Nerve's bare round);
- llm: two `llm_role(model="echo")` roles (the offline echo model of the
  llm-echo plugin), keeping their conversation, with a short prompt builder so
  the echo's output does not grow round by round.

A round's gap is the time between two consecutive `message` events in the
kernel (ThreadMessage line, the log row committed, the Ack back, moderator,
role). For the llm workflow the model call itself — prompt, text and usage as
llm reports them, timed by llm_role into meta.duration_ms — is subtracted:
what is left is what Nerve (and the llm plumbing around the call: resolving
the model, the conversation, the meta) adds. The plain round's gap, measured
in the same run, is the floor it is set against; the echo call's own time is
shown too.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import PINGPONG_WORKFLOW, Report, machine, median, pct, us

from nerve_cli.config.model import NerveConfig
from nerve_cli.kernel.workflows.manager import WorkflowManager
from nerve_cli.store.logs import LogStore

ROUNDS = 600
WARMUP = 50


LLM = '''
from nerve_cli.sdk import END, WorkflowDefinition, llm_role

def short(messages):  # the echo answers with its prompt: keep it from growing round by round
    return f"round {len(messages)}"

ping = llm_role(model="echo", system="Answer briefly.", prompt=short)
pong = llm_role(model="echo", system="Answer briefly.", prompt=short)

def route(messages):
    if len(messages) > messages[0].meta["maxRounds"]:
        return END
    return "ping" if messages[-1].role != "ping" else "pong"

workflow = WorkflowDefinition(roles={"ping": ping, "pong": pong}, moderator=route)
'''


def instance(root: Path, name: str, code: str) -> tuple[Path, NerveConfig]:
    home = root / name
    (home / "workflows").mkdir(parents=True)
    (home / "workflows" / "pp.py").write_text(code)
    config = NerveConfig.model_validate({"engine": {"max_rounds": ROUNDS},
                                         "workflows": {"pp": {"concurrency": 1}}})
    return home, config


async def rounds(home: Path, config: NerveConfig) -> tuple[list[float], list[float]]:
    """(gap between consecutive rounds in µs, the model call's own µs per round: 0 for plain roles)."""
    logs = LogStore(home / "data" / "logs.db")
    manager = WorkflowManager(home, config, logs, lambda level, line: None)
    stamps: list[tuple[int, float]] = []
    finished = asyncio.Event()

    def listener(run_id: str, workflow: str, type_: str, payload: dict) -> None:
        if type_ == "message" and payload.get("seq", 0) > 0:
            stamps.append((time.perf_counter_ns(), float(payload.get("meta", {}).get("duration_ms", 0.0))))
        elif type_ in ("completed", "failed", "crashed"):
            finished.set()
            if type_ != "completed":
                raise SystemExit(f"bench thread {type_}: {payload.get('reason')}")

    manager.add_listener(listener)
    manager.launch("pp", "many rounds", ROUNDS, {})
    await asyncio.wait_for(finished.wait(), 300)
    await manager.stop(1)
    logs.close()
    gaps = [(b[0] - a[0]) / 1000 for a, b in zip(stamps, stamps[1:])][WARMUP:]
    calls = [b[1] * 1000 for b in stamps[1:]][WARMUP:]
    return gaps, calls


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["LLM_USER_PATH"] = str(Path(tmp) / "llm-user")  # never the user's llm config
        plain, _ = asyncio.run(rounds(*instance(Path(tmp), "plain", PINGPONG_WORKFLOW)))
        gaps, calls = asyncio.run(rounds(*instance(Path(tmp), "llm", LLM)))
    overhead = [g - c for g, c in zip(gaps, calls)]
    floor = median(plain)
    report = Report(f"Model-backed rounds ({machine()})")
    report.row("llm_role round beyond the model call, median", us(median(overhead)),
               f"plain-role round {us(floor)}", "≤ 3× floor", median(overhead) <= 3 * floor)
    report.row("llm_role round beyond the model call, p99", us(pct(overhead, 99)),
               f"plain-role round p99 {us(pct(plain, 99))}", "≤ 5 ms", pct(overhead, 99) <= 5000)
    report.row("the echo model call itself, median", us(median(calls)), "", "", True)
    report.row("llm_role round in all, median", us(median(gaps)), "", "", True)
    report.note(f"{len(gaps)} rounds of each kind, one thread, the same run; the model call is what llm_role "
                "times around prompt → text → usage (meta.duration_ms); every message is committed to logs.db "
                "before the next step")
    report.print()


if __name__ == "__main__":
    main()
