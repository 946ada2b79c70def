"""`nerve mcp`'s prompts: the texts that start an agent on a task, naming the tools that do it."""

from __future__ import annotations

import json
from typing import Any

CONTRACT = """A sense is senses/NAME/schema.py (its tables: `@table(pk="id")` dataclasses from nerve_cli.sdk) and
senses/NAME/sense.py (`def compute(db, peers)` or `def compute(db, peers, trigger)`). A compute observes, writes
rows with db.insert/db.upsert, and returns a JSON value (a signal), KEEP (rows kept, no signal) or None (rows
dropped, silent), all in one transaction. `trigger.events` are the events of its on: sources since the last
compute that consumed them (each has source, id, ts, payload, kind). Keep payloads small; big data goes in
tables or db.blobs."""


def write_sense(goal: str, sources: str | None = None) -> str:
    if sources:
        where = f" It listens to: {sources} (pass them as `on` to new_sense; their events arrive as trigger.events)."
    else:
        where = " Without sources it runs every minute; give it `on` sources if it should react to senses or channels."
    return f"""Write a Nerve sense that does this: {goal}.{where}

{CONTRACT}

Steps, each a tool of this server:
1. new_sense(name=..., on=[...], recipe=... if one fits: projection, reaction, wait-all, merge, switch,
   heartbeat). It is scaffolded, migrated and registered switched off.
2. write_sense_file for schema.py, then migrate_sense if you changed the tables; then write_sense_file for
   sense.py.
3. check_config: fix every problem it names (file and line).
4. dry_run_sense with sample events (events=[{{"source": ..., "payload": ...}}]): read the signal, the rows per
   table and the prints it reports; nothing is kept. Repeat 2-4 until they are right.
5. enable_sense. Then watch nerve://sense/NAME (subscribe to it) or show_sense for its first real signals."""


def triage(waiting: dict[str, Any]) -> str:
    threads = waiting.get("threads") or []
    if not threads:
        return "No workflow thread is waiting for a person right now (list_threads(status=\"waiting\") is empty)."
    shown = json.dumps([{"run_id": t["run_id"], "workflow": t["workflow"], "question": t.get("reason"),
                         "waiting_since": t.get("updated")} for t in threads], ensure_ascii=False, indent=1)
    return f"""These workflow threads are waiting for a person:

{shown}

For each: read it with show_thread(run_id) (the whole exchange, and what the last role asked), decide, and answer
with approve_thread(run_id, note=...) or reject_thread(run_id, note=...). The note is the next message the
workflow's moderator sees, so say what to do next. When you cannot decide, leave it waiting and say why."""


def quiet(sense: str) -> str:
    return f"""Find out why the sense `{sense}` has stopped signalling, and say what would fix it.

Look, in this order: engine_status (is the engine running; is {sense} stale, penalised, quarantined or
load-failed; its last error; the listeners section: events waiting for it and how old the oldest is),
show_sense("{sense}") (its settings, load_problem, latest signals), query_logs(ref="{sense}", since="1d") (its
computes: outcome silent means it returned None; errors with file:line), and dry_run_sense("{sense}") (what one
compute would do now, with the events waiting for it). Report the cause and the smallest change that fixes it."""
