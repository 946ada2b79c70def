"""Shell completion of names (senses, workflows, channels, threads), called by Click as the user presses Tab.

Cheap on purpose: nerve.yaml is read with PyYAML (no pydantic model, no
validation), threads with one read-only SQLite query, and nothing imports the
engine. Anything unreadable completes to nothing rather than failing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nerve_cli.home import Layout

MAX_THREADS = 200


def _home(ctx: Any) -> Path:
    from nerve_cli.home import resolve_home

    while ctx is not None:  # --home may have been given on the command line before the word being completed
        if ctx.params.get("home"):
            return resolve_home(ctx.params["home"])
        ctx = ctx.parent
    return resolve_home(None)


def _config(ctx: Any) -> dict:
    try:
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        data = yaml.load((_home(ctx) / "nerve.yaml").read_text(encoding="utf-8"), Loader=loader)
    except Exception:  # completion never fails loudly: no names is the answer
        return {}
    return data if isinstance(data, dict) else {}


def _section(ctx: Any, key: str) -> list[str]:
    section = _config(ctx).get(key)
    return [str(k) for k in section] if isinstance(section, dict) else []


def _matching(names: list[str], incomplete: str) -> list[str]:
    return sorted({n for n in names if n.startswith(incomplete)})


def senses(ctx: Any, incomplete: str) -> list[str]:
    return _matching(_section(ctx, "senses"), incomplete)


def workflows(ctx: Any, incomplete: str) -> list[str]:
    return _matching(_section(ctx, "workflows"), incomplete)


def channels(ctx: Any, incomplete: str) -> list[str]:
    """`on:` names that are not senses: what `nerve emit` feeds."""
    from nerve_cli.names import BUILTIN_SENSES  # dependency-free: completion stays quick

    config = _config(ctx)
    known = set(config.get("senses") or {}) | set(BUILTIN_SENSES)
    # PyYAML reads YAML 1.1, where the key `on` is the boolean true
    names = [str(n) for r in config.get("reflexes") or [] if isinstance(r, dict)
             for n in r.get("on", r.get(True)) or [] if n not in known]
    return _matching(names, incomplete)


def threads(ctx: Any, incomplete: str) -> list[str]:
    """The newest thread ids, newest first (the shell may sort them again)."""
    import sqlite3

    from nerve_cli.store.sqlitefile import open_reader

    path = Layout(_home(ctx)).logs_db
    if not path.is_file():
        return []
    try:
        conn = open_reader(path)
        try:
            rows = conn.execute("SELECT run_id FROM workflow_runs WHERE run_id LIKE ? "
                                "ORDER BY CAST(substr(run_id, 5) AS INTEGER) DESC LIMIT ?",
                                (incomplete + "%", MAX_THREADS)).fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []
    return [r[0] for r in rows]


def refs(ctx: Any, incomplete: str) -> list[str]:
    """`logs --ref`: a sense or a thread."""
    return senses(ctx, incomplete) + threads(ctx, incomplete)
