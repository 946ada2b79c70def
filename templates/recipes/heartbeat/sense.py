"""The {{name}} heartbeat: fire when a source goes quiet, and again when it is heard from.

Every event of a source in this sense's `on:` list is a beat. Its reflex also
runs it on an interval (1m as scaffolded) to notice silence: a source not
heard from for `QUIET_S` seconds fires `{"quiet": [{"source", "last_ms"}],
"back": []}` once, and its next beat fires `{"quiet": [], "back": [{"source",
"quiet_s"}]}`. Beats in between are kept silently (`KEEP`). A source never
heard from is timed from this sense's first compute. Edit `QUIET_S` (and the
reflex's interval: silence is noticed at most that late).
"""

import time

from nerve_cli.sdk import KEEP

from .schema import Beat

QUIET_S = 600.0  # seconds without an event after which a source is quiet


def compute(db, peers, trigger):
    now = time.time_ns() // 1_000_000
    beats = {beat.source: beat for beat in db.rows(Beat)}
    back = []
    for event in trigger.events:
        was = beats.get(event.source)
        if was is not None and was.quiet:
            back.append({"source": event.source, "quiet_s": round((event.ts - was.last_ms) / 1000, 3)})
        beats[event.source] = Beat(source=event.source, last_ms=max(event.ts, was.last_ms if was else 0), quiet=False)
    quiet = []
    for source in trigger.sources:
        beat = beats.get(source) or Beat(source=source, last_ms=now, quiet=False)
        if not beat.quiet and now - beat.last_ms >= QUIET_S * 1000:
            quiet.append({"source": source, "last_ms": beat.last_ms})
            beat = Beat(source=source, last_ms=beat.last_ms, quiet=True)
        beats[source] = beat
    for beat in beats.values():
        db.upsert(beat)
    return {"quiet": quiet, "back": back} if quiet or back else KEEP
