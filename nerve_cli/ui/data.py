"""What the console shows, read as `nerve top` reads it: the engine's status over the control socket, or (the
engine stopped) the same picture from the files; threads, senses, the log and the mesh from the instance.

Every read opens its own read-only connections, so a page never holds the engine up. `change_stamp` is
what the live updates watch: the log's newest row id (every compute, signal and thread step writes one).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from nerve_cli.config.load import load_config
from nerve_cli.config.mesh import build, declared, observed_launches
from nerve_cli.config.model import NerveConfig
from nerve_cli.config.pipeline import pipelines_of
from nerve_cli.contract.engine import status as status_document
from nerve_cli.contract.instance import mesh as mesh_document
from nerve_cli.contract.threads import thread_list, thread_show
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.ops.client import request
from nerve_cli.ops.senses.chart import sense_series
from nerve_cli.ops.senses.inspect import show_sense
from nerve_cli.ops.stopped import stopped_answer
from nerve_cli.ops.workflows.threads import list_threads, thread_detail
from nerve_cli.store.logs import open_readonly, query_logs


class Reader:
    def __init__(self, home: Path) -> None:
        self.home = Path(home)
        self.layout = Layout(self.home)
        self._config: tuple[int, NerveConfig] | None = None

    def config(self) -> NerveConfig:
        """nerve.yaml, parsed again only when the file changed (1,000 senses take ruamel a second)."""
        stamp = self.layout.config.stat().st_mtime_ns
        if self._config is None or self._config[0] != stamp:
            self._config = (stamp, load_config(self.home))
        return self._config[1]

    def status(self) -> dict[str, Any]:
        """The `status` document: live when an engine answers, else read from the files (`running: false`)."""
        answer: dict[str, Any] | None = None
        if self.layout.socket.exists():
            try:
                answer = request(self.home, "status", timeout=2.0)
            except NerveError:
                answer = None
        return status_document(answer if answer is not None else stopped_answer(self.home, self.config()))

    def threads(self, status: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        return thread_list(list_threads(self.layout.logs_db, status=status, limit=limit))["threads"]

    def thread(self, run_id: str) -> dict[str, Any]:
        return thread_show(thread_detail(self.layout.logs_db, run_id))

    def inbox(self) -> list[dict[str, Any]]:
        """Every thread waiting for a person, with its open questions (the `thread show` document of each)."""
        out = []
        for t in self.threads(status="waiting"):
            if t.get("waits") not in (None, "person"):
                continue
            shown = self.thread(t["run_id"])
            if (shown.get("waiting_for") or {}).get("kind") == "person":
                out.append(shown)
        return out

    def sense(self, name: str) -> dict[str, Any]:
        detail = show_sense(self.home, name, last=20, rows=10, check_code=False, config=self.config())
        errors = [r for r in query_logs(self.layout.logs_db, source="system", type="error", ref=name, limit=20)]
        runs = query_logs(self.layout.logs_db, source="reflex", ref=name, limit=20)
        return {"name": name, "summary": detail.summary, "config": detail.config, "tables": detail.tables,
                "signals": list(reversed(detail.signals)), "recent_rows": detail.recent_rows,
                "blocked": detail.blocked, "errors": list(reversed(errors)), "runs": list(reversed(runs)),
                "peers": detail.peers, "readers": detail.readers}

    def chart(self, name: str, column: str | None = None) -> dict[str, Any]:
        """uPlot's data: [[x seconds...], [y...]] (the signal's numbers, or a payload key's)."""
        try:
            series = sense_series(self.home, name, column)
        except NerveError as exc:
            return {"sense": name, "column": column or "signal", "x": [], "y": [], "problem": str(exc)}
        return {"sense": name, "column": series.column, "x": [t / 1000 for t, _ in series.points],
                "y": [v for _, v in series.points], "problem": None}

    def logs(self, source: str | None = None, type_: str | None = None, ref: str | None = None,
             limit: int = 200) -> list[dict[str, Any]]:
        return list(reversed(query_logs(self.layout.logs_db, source=source or None, type=type_ or None,
                                        ref=ref or None, limit=limit)))

    def mesh(self) -> dict[str, Any]:
        config = self.config()
        graph = build(config, observed_launches(self.layout.logs_db), pipelines_of(self.home, list(config.workflows)),
                      declared(self.home, config))
        return mesh_document(graph)

    def change_stamp(self) -> int:
        """The log's newest row id (0 before there is a log)."""
        if not self.layout.logs_db.exists():
            return 0
        try:
            conn = open_readonly(self.layout.logs_db)
        except NerveError:
            return 0
        try:
            row = conn.execute("SELECT MAX(id) FROM logs").fetchone()
            return int(row[0] or 0)
        except sqlite3.OperationalError:
            return 0
        finally:
            conn.close()
