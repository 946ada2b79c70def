"""The files the running loop writes, opened in order before any part runs: the log, the ledger's catch-up,
the built-in senses' databases, the figures that survive a restart; and the engine's first rows once it runs.

`open_stores` registers each one's teardown in the engine's exit stack as it opens it, so a failure half way
closes what opened. The ledger runs first of all readers of the log: it owes the rows a killed kernel (or an
offline `nerve emit`) did not write.
"""

from __future__ import annotations

import asyncio
import os
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from nerve_cli import eventloop
from nerve_cli.address import ListenAddress
from nerve_cli.config.model import BUILTIN_SENSES, THREADS_SENSE, NerveConfig
from nerve_cli.home import Layout
from nerve_cli.kernel.control.health import HEALTH_SENSE, HealthStore
from nerve_cli.kernel.control.threads_sense import ThreadsStore
from nerve_cli.kernel.core.ledger import Ledger
from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.kernel.core.stats import SIGNAL_MARK, SUCCESS_MARK, EngineStats
from nerve_cli.kernel.loop.edges import exposed_metrics
from nerve_cli.kernel.loop.logwriter import LogWriter
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows


@dataclass
class Stores:
    logs: LogStore
    log: Log  # the log writer's: rows batched off the loop
    ledger: Ledger
    health: HealthStore
    threads: ThreadsStore
    completions: dict[str, float]  # each sense's last completed compute (epoch seconds)
    stats: EngineStats


async def open_stores(stack: AsyncExitStack, layout: Layout, report: Report, tap: Callable[[Any], None] | None,
                      halts: list[Callable[[], object]]) -> Stores:
    """Open the log (`tap`: traces see each row), catch the ledger up, open the built-ins' databases and read
    back what the figures were; `halts` gets the log writer's stop (rows then wait for the store's close)."""
    logs = LogStore(layout.logs_db)
    stack.callback(logs.close)
    if tap is not None:
        logs.tap = tap  # threads, rounds and model calls come from the rows their manager writes
    writer = LogWriter(logs, layout.logs_db, report)
    stack.push_async_callback(writer.close)
    halts.append(writer.stop)
    ledger = Ledger(layout, logs, writer.log)
    signals, events = ledger.start()  # before anything reads the log: it owes these rows
    if signals or events:
        report("warn", f"logged {signals} signal(s) and {events} event(s) committed while no engine "
                       "was logging them (a previous engine was killed, or `nerve emit` stored them)")
    logs.flush()
    health = HealthStore(layout.sense_db(HEALTH_SENSE))
    stack.callback(health.close)
    threads = ThreadsStore(layout.sense_db(THREADS_SENSE), layout.logs_db)
    stack.callback(threads.close)
    if not logs.anchored:  # a logs.db from before the completion anchors: scanned once, off the loop
        await asyncio.get_running_loop().run_in_executor(None, logs.backfill_anchors)
    completions = {k: v / 1000 for k, v in logs.last_completions().items()}
    stats = EngineStats()
    stats.restore(logs.meta_with_prefix(SUCCESS_MARK), logs.meta_with_prefix(SIGNAL_MARK))
    return Stores(logs, writer.log, ledger, health, threads, completions, stats)


def announce(log: Log, report: Report, home: Path, config: NerveConfig, warnings: list[str],
             metrics_at: ListenAddress | None) -> None:
    """The engine's first rows once every part is built: engine_started, nerve.yaml's warnings, an exposed
    metrics address."""
    log(logrows.engine_started(os.getpid(), sorted(config.enabled_senses()), sorted(config.sense_groups()),
                               eventloop.name()))
    for warning in warnings:
        log(logrows.warning("nerve.yaml", warning))
    if metrics_at is not None and not metrics_at.loopback:
        log(logrows.warning("metrics", exposed_metrics(metrics_at)))
    report("info", f"engine pid={os.getpid()} started on {home}")


def log_stopped(ledger: Ledger, log: Log, config: NerveConfig, started_at: float) -> None:
    """Every worker is down: what they committed unanswered is logged, then the engine's last row."""
    ledger.catch_up_all([*config.senses, *BUILTIN_SENSES])
    log(logrows.engine_stopped(os.getpid(), round(time.time() - started_at, 3)))
