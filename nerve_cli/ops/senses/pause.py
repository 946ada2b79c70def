"""`nerve sense pause|resume NAME|--group G`: through the running engine, or kept in logs.db for the next one.

With an engine running its control socket does it (`pause_sense`): a paused sense starts no compute from
then on. With none, the pause is written where the engine keeps it (`store.sense_pauses`, under the
instance lock) and the next engine starts with the sense paused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.clock import now_ms
from nerve_cli.config.load import load_config
from nerve_cli.home import Layout
from nerve_cli.instance.git import person
from nerve_cli.ops.client import engine_running, request
from nerve_cli.store import sense_pauses
from nerve_cli.store.lock import InstanceLock
from nerve_cli.store.logs import LogStore
from nerve_cli.vocab import logrows


def pause_senses(home: Path, names: list[str], group: str | None, via: str, *, resume: bool = False) -> dict[str, Any]:
    """{"senses": [{"sense", "status": paused|resumed|unchanged, "paused"}], "via": engine|offline};
    SenseError for an unknown sense or group, or a built-in sense."""
    by = person(home)
    if engine_running(home):
        body: dict[str, Any] = {"group": group} if group is not None else {"senses": names}
        answer = request(home, "pause_sense", resume=resume, by=by, via=via, **body)
        return {"senses": answer["senses"], "via": "engine"}
    return {"senses": _offline(Layout(Path(home)), names, group, by, via, resume), "via": "offline"}


def _offline(layout: Layout, names: list[str], group: str | None, by: str, via: str,
             resume: bool) -> list[dict[str, Any]]:
    config = load_config(layout.home)
    senses = sense_pauses.resolve(config.senses, names, group)
    out = []
    with InstanceLock(layout.home, f"nerve sense {'resume' if resume else 'pause'}"):
        paused = sense_pauses.load_pauses(layout.logs_db)
        with LogStore(layout.logs_db) as logs:
            for sense in senses:
                if (sense in paused) != resume:
                    out.append({"sense": sense, "status": "unchanged", "paused": not resume})
                elif resume:
                    sense_pauses.lift(logs, sense)
                    since = paused[sense].get("since_ms")
                    logs.write(logrows.sense_resumed(sense, by, via, now_ms() - since if since else None))
                    out.append({"sense": sense, "status": "resumed", "paused": False})
                else:
                    sense_pauses.keep(logs, sense, {"by": by, "via": via, "since_ms": now_ms()})
                    logs.write(logrows.sense_paused(sense, by, via))
                    out.append({"sense": sense, "status": "paused", "paused": True})
    return out
