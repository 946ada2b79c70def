"""`nerve sense compute NAME --dry-run [--event SOURCE=JSON ...]`: try a sense without keeping anything.

The real compute runs in a real worker, spawned for it alone whether or not
an engine runs, on the sense's real database (`worker.rehearsal`): its
events are the ones waiting for it, or the samples given, and everything it
does is rolled back where it would commit, on a copy of its database. The
answer says what it would
have signalled (and which workflow it would have launched), the rows it would
have written per table, where its cursors would have moved, the blobs it
would have stored, and what it printed; an error shows its file and line.
Nothing is logged, no cursor moves, no row stays, no blob is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from nerve_cli.config.load import load_config
from nerve_cli.config.mesh import sources_of
from nerve_cli.config.projection import reading
from nerve_cli.config.rules import hint
from nerve_cli.contract import VERSION
from nerve_cli.errors import NerveError
from nerve_cli.kernel.core.listeners import all_sources
from nerve_cli.kernel.supervision.policy import Policy
from nerve_cli.ops.senses.standalone import START_TIMEOUT, not_a_user_sense, one_compute
from nerve_cli.store.events import EventError, parse_payload_text
from nerve_cli.vocab.outcomes import Outcome
from nerve_cli.vocab.reasons import DEMAND
from nerve_cli.wire.protocol import Compute, DryRun, Error, ErrorInfo
from nerve_cli.wire.spec import GroupSpec
from nerve_cli.worker.events import MAX_EVENTS


@dataclass(frozen=True)
class DryRunResult:
    sense: str
    outcome: Outcome  # signal | silent | error
    kept: bool = False  # silent, keeping its rows (KEEP)
    payload: Any = None
    workflow: str | None = None
    duration_ms: float | None = None
    error: ErrorInfo | None = None
    output: tuple[dict[str, str], ...] = ()
    tables: dict[str, Any] | None = None
    cursors: dict[str, list[int]] | None = None
    events: int = 0
    blobs: dict[str, int] | None = None
    copy: bool = False
    emits: tuple[dict[str, Any], ...] = ()  # what it would emit (nerve_cli.sdk.emit): {channel, payload, key}

    def to_json(self) -> dict[str, Any]:
        """The `sense-dry-run` document."""
        return {
            "version": VERSION, "sense": self.sense, "outcome": "kept" if self.kept else self.outcome.value,
            "payload": self.payload,
            "workflow": self.workflow,
            "duration_s": None if self.duration_ms is None else round(self.duration_ms / 1000, 6),
            "error": self.error.to_dict() if self.error is not None else None, "output": list(self.output),
            "events": self.events,
            "tables": [{"name": name, **entry} for name, entry in sorted((self.tables or {}).items())],
            "cursors": [{"source": s, "from": a, "to": b} for s, (a, b) in (self.cursors or {}).items()],
            "blobs": [{"sha256": sha, "bytes": n} for sha, n in sorted((self.blobs or {}).items())],
            "emits": [{"channel": e["channel"], "payload": None if e.get("payload") is None else
                       orjson.loads(e["payload"]), "key": e.get("key")} for e in self.emits],
            "database": "copy" if self.copy else "rolled back",
            "kept": KEPT + ("" if self.copy else " " + KEPT_ON_FILE),
        }

# What a dry run does not undo, said in every answer: it undoes what goes through `db`, `peers` and the blobs
KEPT = ("what the code does outside db, peers and db.blobs is not undone: files it writes, processes it starts, "
        "network calls, and databases it opens itself (data/events.db included)")
KEPT_ON_FILE = ("It ran on the database file itself (too large to copy), in a transaction that was rolled back: a "
                "commit of its own through db.conn would stay.")
MAX_SAMPLES = MAX_EVENTS  # sample events in one dry run: what one compute receives at most


def parse_event(text: str) -> tuple[str, Any]:
    """`SOURCE=JSON` (`--event task.created='{"id": 7}'`) → (source, payload)."""
    source, sep, payload = text.partition("=")
    if not sep or not source.strip():
        raise NerveError(f"--event {text[:60]!r}: expected SOURCE=JSON, e.g. --event 'task.created={{\"id\": 7}}'")
    try:
        return source.strip(), parse_payload_text(payload, f"the payload of --event {source.strip()}")
    except EventError as exc:
        raise NerveError(f"--event: {exc}") from None


def dry_run(home: Path, name: str, events: list[tuple[str, Any]] | None = None, *,
            stderr: int | IO[Any] | None = None, bind: dict[str, Any] | None = None) -> DryRunResult:
    """Run `name` once without keeping anything; `events` (source, payload) replace the real ones when given;
    `bind`: a sense with parameters rehearses for these values (their events, their cursors)."""
    config = load_config(home)
    settings = config.senses.get(name)
    if settings is None:
        raise not_a_user_sense(config, name, "a dry run rehearses a sense's own code")
    filters = reading(config, name).filters(bind) or None  # BindError before anything starts
    sources = (sources_of(config).get(name) or {}) if settings.enabled else all_sources(config, name)
    sample = None
    if events is not None and len(events) > MAX_SAMPLES:
        raise NerveError(f"{len(events):,} sample events; a compute receives at most {MAX_SAMPLES:,}")
    if events is not None:
        for source, _payload in events:
            if source not in sources:  # the real compute would never receive it: a typo, most likely
                listened = ", ".join(sorted(sources)) or "nothing (no reflex gives it `on:` or `paths:`)"
                raise NerveError(f"--event {source}: {name} does not listen to {source!r}{hint(source, list(sources))}; "
                                 f"it listens to {listened}")
        sample = [{"source": source, "payload": payload, "kind": sources.get(source) or config.source_kind(source)}
                  for source, payload in events]
    policy = Policy.of(config.engine, ready_timeout=START_TIMEOUT)  # as a one-off compute: a first import is cold
    spec = GroupSpec.from_config(config, settings.group, [name]).to_json()
    request = Compute(0, name, DEMAND, sources or None, dry_run=True, sample=sample, filters=filters, bind=bind or None)
    answer, printed = one_compute(home, name, settings.group, policy, policy.limits(settings), stderr, request, spec,
                                  dry_run=True)
    if isinstance(answer, ErrorInfo):
        return DryRunResult(name, Outcome.ERROR, error=answer, output=printed)
    if isinstance(answer, Error):  # cancelled at its timeout
        return DryRunResult(name, Outcome.ERROR, duration_ms=answer.duration_ms, error=answer.error, output=printed)
    assert isinstance(answer, DryRun)
    return DryRunResult(name, answer.outcome, answer.kept, answer.payload, answer.workflow, answer.duration_ms,
                        answer.error, printed, answer.tables, answer.cursors, answer.events, answer.blobs, answer.copy,
                        tuple(answer.emits))
