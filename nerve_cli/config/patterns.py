"""What each `on:` pattern (`pr.*`, `ci.>`) matches today, for `nerve config check`.

A pattern's names are the channels it would hear: those nerve.yaml declares (`channels:`, other reflexes' and
agents' `on:`, the fleet's channels, a workflow's waits) and those data/events.db has seen. A pattern matching
none of them is warned about: a typo in a pattern is silent otherwise (it simply never fires). Senses a pattern
would match are listed too, as not heard: patterns are over channel names.

Reads events.db with sqlite3 alone (the `config check` path imports no store), one index probe per distinct
channel, at most SEEN_MAX of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

from nerve_cli.home import Layout
from nerve_cli.names import BUILTIN_SENSES, is_pattern, pattern_matches, pattern_problem

SEEN_MAX = 10_000  # distinct channels read from events.db; past that the list is cut (said in `truncated`)

Finding = tuple[tuple, Literal["error", "warning"], str]


@dataclass
class Pattern:
    """One `on:` pattern, the reflexes naming it and what it matches today."""

    pattern: str
    reflexes: list[int] = field(default_factory=list)
    declared: list[str] = field(default_factory=list)  # channels nerve.yaml names
    seen: list[str] = field(default_factory=list)  # channels data/events.db holds events of (not declared)
    senses: list[str] = field(default_factory=list)  # senses it would match: not heard (patterns are over channels)

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "reflexes": self.reflexes, "declared": self.declared, "seen": self.seen,
                "senses": self.senses}


def seen_channels(home: Path | None, limit: int = SEEN_MAX) -> list[str]:
    """The distinct channels data/events.db holds events of (skipping along idx_events_channel), up to `limit`."""
    if home is None:
        return []
    path = Layout(Path(home)).events_db
    if not path.is_file():
        return []
    import sqlite3  # only where data/events.db exists

    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return []
    out: list[str] = []
    try:
        row = conn.execute("SELECT min(channel) FROM events").fetchone()
        while row is not None and row[0] is not None and len(out) < limit:
            out.append(row[0])
            row = conn.execute("SELECT min(channel) FROM events WHERE channel > ?", (row[0],)).fetchone()
    except sqlite3.Error:
        pass  # no events yet, or unreadable now: nothing seen
    finally:
        conn.close()
    return out


def check_patterns(data: dict, senses: dict, declared: Iterable[str], home: Path | None
                   ) -> tuple[list[Finding], list[Pattern]]:
    """Each reflex's patterns with what they match; a warning for each that matches nothing. (A malformed
    pattern is the model's error, with its fix.)"""
    patterns: dict[str, Pattern] = {}
    where: dict[str, tuple] = {}
    reflexes = data.get("reflexes")
    for i, reflex in enumerate(reflexes if isinstance(reflexes, list) else []):
        if not isinstance(reflex, dict) or not isinstance(reflex.get("on"), list):
            continue
        for j, source in enumerate(reflex["on"]):
            if isinstance(source, str) and is_pattern(source) and pattern_problem(source) is None \
                    and source not in senses:
                patterns.setdefault(source, Pattern(source)).reflexes.append(i)
                where.setdefault(source, ("reflexes", i, "on", j))
    if not patterns:
        return [], []
    named = sorted({n for n in declared if isinstance(n, str) and not is_pattern(n)} - set(senses))
    seen = seen_channels(home)
    sense_names = [*(n for n in senses if isinstance(n, str)), *BUILTIN_SENSES]
    findings: list[Finding] = []
    for pattern in patterns.values():
        pattern.declared = [n for n in named if pattern_matches(pattern.pattern, n)]
        pattern.seen = [n for n in seen if pattern_matches(pattern.pattern, n) and n not in pattern.declared]
        pattern.senses = [n for n in sense_names if pattern_matches(pattern.pattern, n)]
        findings.extend(_warnings(pattern, where[pattern.pattern], home))
    return findings, list(patterns.values())


def _warnings(pattern: Pattern, loc: tuple, home: Path | None) -> Iterator[Finding]:
    if pattern.senses:
        yield loc, "warning", (
            f"pattern `{pattern.pattern}` matches sense(s) {', '.join(pattern.senses)}, which it does not hear: "
            "patterns are over channel names; list a sense by its name")
    if not pattern.declared and not pattern.seen:
        where = "nerve.yaml or data/events.db" if home is not None else "nerve.yaml"
        yield loc, "warning", (
            f"pattern `{pattern.pattern}` matches no channel named in {where} yet, so it hears nothing today; "
            "check its tokens (`*` is one dot-separated token, `>` one or more last ones) or emit to a channel it "
            "matches")
