"""The engine's daily cold archive (RFC §5.4): once at start-up, then every day.

It runs in a thread with its own connections and bounded, one-day
transactions, so computes and log writes carry on. VACUUM is left to
`nerve archive`, because it needs the database to itself for as long as it takes.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nerve_cli.kernel.engine import Engine

EVERY = 86400.0


async def archive_daily(engine: "Engine") -> None:
    from nerve_cli.store.archive import archive

    while not engine.stopping:
        older_than = engine.config.engine.archive_after
        try:
            report = await asyncio.to_thread(archive, engine.home, older_than_s=older_than, vacuum=False)
        except Exception as exc:  # a full disk or a bad file must not stop the engine
            engine.log("system", "error", "archive", {"message": f"archive failed: {type(exc).__name__}: {exc}"})
            engine.report("error", f"archive failed: {exc}")
        else:
            if report.rows or report.problems:
                engine.log("system", "archived", "archive", report.as_dict())
                engine.report("info", f"archived {report.rows} rows up to {report.up_to}")
            for problem in report.problems:
                engine.report("error", f"archive: {problem}")
        await asyncio.sleep(EVERY)
