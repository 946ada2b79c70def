"""What `nerve emit` does: send an event to an external channel, durably, with or without an engine.

With an engine running, the event goes through its control socket and the
answer comes once it is committed to data/events.db, naming the senses it
woke. With none, the event is written to data/events.db here, and the next
engine start delivers it: its listeners find it unconsumed when their worker
is ready, and the engine logs it then. Either way the event is stored exactly
once per `key` (when one is given), so a script may resend after an error.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

from nerve_cli.automaton.waits import matches
from nerve_cli.config.fleet import emit_refusal
from nerve_cli.config.load import load_config
from nerve_cli.contract.engine import emit
from nerve_cli.errors import EngineNotRunning, NerveError
from nerve_cli.home import Layout
from nerve_cli.names import hears, traceparent_problem
from nerve_cli.ops.client import engine_running, request
from nerve_cli.store.events import parse_payload_text, store_event
from nerve_cli.store.runs import waiting_on
from nerve_cli.vocab.sources import SourceKind


@dataclass(frozen=True)
class Emitted:
    channel: str
    event_id: int
    ts: int
    via: str  # "engine" | "disk"
    triggered: list[str] = field(default_factory=list)  # senses the engine woke now
    listeners: list[str] = field(default_factory=list)  # senses whose enabled reflexes list the channel
    duplicate: bool = False
    schema_version: str | None = None
    hash: str | None = None
    resumes: list[str] = field(default_factory=list)  # waiting threads whose wait this event's payload matches

    def to_json(self) -> dict[str, Any]:
        """The `emit` document (nerve_cli.contract)."""
        return emit(self.channel, self.triggered, event_id=self.event_id, stored_ms=self.ts,
                    delivered="now" if self.via == "engine" else "at next start", listeners=self.listeners,
                    duplicate=self.duplicate, schema_version=self.schema_version, hash=self.hash,
                    resumes=self.resumes)


def read_payload(text: str | None, stdin: IO[str] | None = None) -> Any:
    """The payload argument: JSON text, `-` for standard input, or None (no payload)."""
    if text is None:
        return None
    source = "the payload"
    if text == "-":
        text, source = (stdin or sys.stdin).read(), "the payload read from stdin"
        if not text.strip():
            raise NerveError("`-` reads the payload from stdin, but stdin was empty; pipe JSON in, e.g. "
                             "`echo '{\"id\": 7}' | nerve emit task.created -`")
    return parse_payload_text(text, source)


def listeners_of(home: Path, channel: str) -> list[str]:
    config = load_config(home)
    if config.source_kind(channel) is SourceKind.SENSE:
        raise NerveError(f"{channel!r} is a sense: senses emit their own signals; use `nerve sense compute {channel}`")
    refused = emit_refusal(config.fleet, channel)
    if refused is not None:
        raise NerveError(refused)
    return sorted({r.sense for r in config.active_reflexes() if hears(r.on, channel)})


def emit_event(home: Path, channel: str, payload: Any, key: str | None = None, schema_version: str | None = None,
               hashed: bool = False, traceparent: str | None = None) -> Emitted:
    """Send one event through the running engine, or store it for the next start.

    `schema_version`: what the payload's schema is, as the emitter names it; `hashed`: store the payload's
    content hash (`sha256:` of its canonical JSON) with it; `traceparent`: the W3C trace context the event
    continues, kept only by a running engine.
    """
    if traceparent is not None and (problem := traceparent_problem(traceparent)) is not None:
        raise NerveError(problem)
    # looked up first: once the engine has the event, a thread it matched is no longer waiting
    resumes = _resumes(home, channel, payload)
    try:
        answer = request(home, "emit", channel=channel, payload=payload, key=key, schema_version=schema_version,
                         hash=hashed, traceparent=traceparent)
    except EngineNotRunning:
        stored = _store_offline(home, channel, payload, key, schema_version, hashed)
        return replace(stored, resumes=[] if stored.duplicate else resumes)
    duplicate = answer.get("duplicate", False)
    return Emitted(channel, answer["event_id"], answer["ts"], "engine", answer["triggered"],
                   answer["triggered"], duplicate, answer.get("schema_version"), answer.get("hash"),
                   [] if duplicate else resumes)


def _resumes(home: Path, channel: str, payload: Any) -> list[str]:
    """The threads waiting for an event of `channel` whose match `payload` meets."""
    return [run_id for run_id, match in waiting_on(Layout(home).logs_db, channel)
            if matches(payload, match if isinstance(match, dict) else {})]



def _store_offline(home: Path, channel: str, payload: Any, key: str | None, schema_version: str | None,
                   hashed: bool) -> Emitted:
    listeners = listeners_of(home, channel)
    event = store_event(Layout(home).events_db, channel, payload, key, schema_version, hashed)
    if engine_running(home):  # one started meanwhile and may have looked already: tell it
        request(home, "events_stored", channel=channel)
    return Emitted(channel, event.id, event.ts, "disk", [], listeners, event.duplicate, event.schema_version,
                   event.hash)
