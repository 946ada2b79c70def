"""The engine's daily cold archive: once at start-up, then every day.

It runs in a thread with its own connections and bounded, one-day
transactions, so computes and log writes carry on. VACUUM is left to
`nerve archive`, because it needs the database to itself for as long as it takes.
The engine cancels the task when it stops.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from nerve_cli.kernel.core.report import Log, Report
from nerve_cli.vocab import logrows
from nerve_cli.words import plural

EVERY = 86400.0


async def archive_daily(home: Path, archive_after: Callable[[], float], log: Log, report: Report) -> None:
    """Archive rows older than `archive_after()` seconds (read each day: a reload may change it), forever."""
    # imported here (~8 ms): the first archive runs once the engine is up, not before its first compute
    from nerve_cli.store.archive import archive

    while True:
        try:
            result = await asyncio.to_thread(archive, home, older_than_s=archive_after(), vacuum=False)
        except Exception as exc:  # a full disk or a bad file must not stop the engine
            log(logrows.error("archive", f"archive failed: {type(exc).__name__}: {exc}"))
            report("error", f"archive failed: {exc}")
        else:
            if result.rows or result.problems:
                log(logrows.archived(result.as_dict()))
                report("info", f"archived {plural(result.rows, 'row')} up to {result.up_to}")
            for problem in result.problems:
                report("error", f"archive: {problem}")
        await asyncio.sleep(EVERY)
