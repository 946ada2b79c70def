"""`nerve gc`: the optional offline clean-up (deletes are soft; this is what finally removes).

Nothing else in Nerve destroys anything: deleting moves to the attic,
disabling keeps the data. `nerve gc --older-than AGE` lists, then removes:

- attic entries (`attic/senses/NAME.<stamp>/`, `attic/workflows/NAME.<stamp>.py`)
  older than AGE (by the stamp in their name);
- the data (`data/senses/NAME.db`, its archive) of a sense that was deleted
  more than AGE ago, of a disabled sense whose database has not been written
  for AGE, and of a name nerve.yaml no longer knows, untouched for AGE;
- the nerve.yaml entry of a deleted sense or workflow once nothing of it is
  left in the attic, with the reflexes that schedule it, unless another entry
  still names it (then it stays, and the listing says who names it);
- blobs (`data/blobs/`) nothing refers to any more (`store.blobrefs`: no row,
  signal, log payload, event or archived day holds their digest), unwritten
  for AGE, once the data removed in the same run is left out; and what a write
  interrupted by a crash left beside them. When a database cannot be read, no
  blob is removed (one of its rows might refer to any of them).

It refuses while an engine runs (a worker may hold a database open) unless
`dry_run`. Removed files that were committed (the attic, nerve.yaml) are
committed as one `nerve: gc` change; data/ is not in git.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nerve_cli.config.edit import edit_config
from nerve_cli.config.load import load_config
from nerve_cli.config.model import BUILTIN_SENSES, NerveConfig, format_duration
from nerve_cli.config.yamltail import remove_entry
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.instance.attic import split_attic_name, stamp_age
from nerve_cli.instance.change import Change
from nerve_cli.ops.client import engine_running
from nerve_cli.store.blobrefs import Unreadable, leftovers, referenced, stored
from nerve_cli.words import plural


@dataclass(frozen=True)
class Garbage:
    kind: str  # attic | data | entry | blob
    what: str  # a path relative to the instance, or `senses.NAME` / `workflows.NAME`
    why: str
    bytes: int = 0
    paths: tuple[Path, ...] = ()  # what is removed on disk (none for an entry)
    name: str = ""  # the sense or workflow it belongs to

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "what": self.what, "why": self.why, "bytes": self.bytes}


@dataclass(frozen=True)
class Young:
    """An attic entry or data that would be collected, but is newer than --older-than."""

    kind: str  # attic | data | blob
    what: str
    why: str
    bytes: int
    age: float  # seconds, by the same clock gc judges it with (its stamp, or the data's last write)
    collectable_at: float  # epoch seconds from which `nerve gc` with this --older-than takes it


@dataclass
class GcResult:
    older_than: float
    items: list[Garbage] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # why something old was not removed
    young: list[Young] = field(default_factory=list)  # what is kept for being newer than older_than
    dry_run: bool = False
    sha: str | None = None

    @property
    def freed(self) -> int:
        return sum(i.bytes for i in self.items)

    @property
    def takes_young(self) -> float | None:
        """A whole --older-than (in d, h, m or s) that would take everything kept for being young now."""
        return _floor_age(min(y.age for y in self.young)) if self.young else None

    def to_dict(self) -> dict[str, Any]:
        return {"older_than_s": self.older_than, "dry_run": self.dry_run, "items": [i.to_dict() for i in self.items],
                "kept": self.kept, "bytes": self.freed, "commit": self.sha}


def collect(home: Path, older_than: float, *, dry_run: bool = False, now: float | None = None) -> GcResult:
    """List (and unless `dry_run`, remove) what is older than `older_than` seconds."""
    if not dry_run:
        _refuse_if_engine_runs(home)
    now = time.time() if now is None else now
    layout, config = Layout(home), load_config(home)
    result = GcResult(older_than, dry_run=dry_run)
    _sort(result, [*_attic(layout, now), *_data(layout, config, now)], now)
    going = [p for item in result.items if item.kind == "data" for p in item.paths]
    try:
        _sort(result, _blobs(layout, going, now), now)
    except Unreadable as exc:
        result.kept.append(f"no blob is collected: {_rel(layout, exc.path)} cannot be read ({exc.why}), and any of "
                           "its rows may refer to a blob; repair or remove it first")
    entries, kept = _entries(layout, config, result.items)
    result.items += entries
    result.kept += kept
    if not dry_run and result.items:
        result.sha = _remove(home, result)
    return result


def _sort(result: GcResult, found: list[tuple[Garbage, float]], now: float) -> None:
    """Old enough: collected; younger: kept, with when it becomes collectable."""
    for item, age in found:
        if age >= result.older_than:
            result.items.append(item)
        else:
            result.young.append(Young(item.kind, item.what, item.why, item.bytes, age, now + result.older_than - age))


def _refuse_if_engine_runs(home: Path) -> None:
    if engine_running(home):
        raise NerveError("an engine is running for this instance; `nerve gc` works offline (a worker may hold a "
                         "database open): stop it first, or look with `nerve gc --dry-run`")


def _attic(layout: Layout, now: float) -> list[tuple[Garbage, float]]:
    """Every attic entry with a stamp, and its age."""
    out = []
    for kind in ("senses", "workflows"):
        folder = layout.attic / kind
        for path in sorted(folder.iterdir()) if folder.is_dir() else []:
            name, when = split_attic_name(path)
            age = stamp_age(when, now) if name else None
            if age is not None:
                out.append((Garbage("attic", _rel(layout, path), f"deleted {_ago(age)}", _size(path), (path,), name),
                            age))
    return out


def _data(layout: Layout, config: NerveConfig, now: float) -> list[tuple[Garbage, float]]:
    """The data of every sense that is deleted, disabled or not in nerve.yaml, and the age gc judges it by."""
    out = []
    for name in sorted(_names_with_data(layout)):
        if name in BUILTIN_SENSES:  # the engine's own: never garbage
            continue
        sense = config.senses.get(name)
        if sense is not None and sense.enabled:
            continue
        files = _data_files(layout, name)
        touched = max(p.stat().st_mtime for p in files)
        deleted = _deleted_at(layout, name, now) if sense is not None else None
        if sense is None:
            why, age = "not in nerve.yaml", now - touched
        elif deleted is not None:
            why, age = "its sense was deleted", deleted
        else:
            why, age = "its sense is disabled", now - touched
        archived = layout.sense_archive(name)
        shown = f"data/senses/{name}.db" + (" and its archive" if archived.is_dir() and any(archived.iterdir()) else "")
        out.append((Garbage("data", shown, f"{why}; last written {_ago(now - touched)}",
                            sum(_size(p) for p in files), tuple(files), name), age))
    return out


def _blobs(layout: Layout, going: list[Path], now: float) -> list[tuple[Garbage, float]]:
    """Blobs no row refers to (the data in `going` left out), and crash leftovers, with the age of their last write."""
    blobs = stored(layout.blobs)
    kept = referenced(layout.data, {b.sha for b in blobs}, skip=going) if blobs else set()
    out = [(Garbage("blob", _rel(layout, b.path), f"nothing refers to it; last written {_ago(now - b.mtime)}",
                    b.bytes, (b.path,)), now - b.mtime) for b in blobs if b.sha not in kept]
    for path in leftovers(layout.blobs):
        out.append((Garbage("blob", _rel(layout, path), "an unfinished write", _size(path), (path,)),
                    now - path.stat().st_mtime))
    return out


def _deleted_at(layout: Layout, name: str, now: float) -> float | None:
    """Seconds since the sense was deleted (its newest attic entry), or None when it was not."""
    if layout.sense_dir(name).is_dir():
        return None
    found = [stamp_age(split_attic_name(p)[1], now) for p in (layout.attic / "senses").glob(f"{name}.*")
             if split_attic_name(p)[0] == name]
    ages = [a for a in found if a is not None]
    return min(ages) if ages else None


def _entries(layout: Layout, config: NerveConfig, removing: list[Garbage]) -> tuple[list[Garbage], list[str]]:
    """nerve.yaml entries of deleted senses/workflows with nothing left in the attic, unless still named."""
    gone = {(g.kind, g.what) for g in removing}
    out: list[Garbage] = []
    kept: list[str] = []
    for kind, names in (("senses", config.senses), ("workflows", config.workflows)):
        for name, settings in names.items():
            if settings.enabled or _present(layout, kind, name) or _in_attic(layout, kind, name, gone):
                continue
            if kind == "senses" and _has_data(layout, name) and not any(
                    g.kind == "data" and g.name == name for g in removing):
                continue  # its data is still young: the entry goes with it, later
            named_by = _named_by(config, name) if kind == "senses" else []
            if named_by:
                kept.append(f"senses.{name} stays in nerve.yaml: {', '.join(named_by)} still name it")
                continue
            own = sum(1 for r in config.reflexes if r.sense == name) if kind == "senses" else 0
            with_reflexes = f", with the {plural(own, 'reflex', 'reflexes')} scheduling it" if own else ""
            out.append(Garbage("entry", f"{kind}.{name}", f"deleted and nothing of it is left in the attic{with_reflexes}",
                               name=name))
    return out, kept


def _present(layout: Layout, kind: str, name: str) -> bool:
    return layout.sense_dir(name).exists() if kind == "senses" else layout.workflow_file(name).exists()


def _in_attic(layout: Layout, kind: str, name: str, gone: set[tuple[str, str]]) -> bool:
    folder = layout.attic / kind
    if not folder.is_dir():
        return False
    return any(split_attic_name(p)[0] == name and ("attic", _rel(layout, p)) not in gone for p in folder.iterdir())


def _named_by(config: NerveConfig, name: str) -> list[str]:
    out = [f"senses.{n}.peers" for n, s in config.senses.items() if name in s.peers]
    out += [f"reflexes[{i}].on" for i, r in enumerate(config.reflexes) if name in r.on and r.sense != name]
    return out


def _remove(home: Path, result: GcResult) -> str | None:
    layout = Layout(home)
    tracked = [p for g in result.items if g.kind == "attic" for p in g.paths]
    entries = [g for g in result.items if g.kind == "entry"]
    change = Change(home, "gc", [*tracked, *([layout.config] if entries else [])])
    change.protect()
    if entries:
        _drop_entries(home, entries)
    for item in result.items:
        for path in item.paths:
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
            if item.kind == "blob" and not any(path.parent.iterdir()):
                path.parent.rmdir()  # an emptied shard folder
    return change.commit(detail=f"(older than {_age_text(result.older_than)})") if change.paths else None


def _drop_entries(home: Path, entries: list[Garbage]) -> None:
    with edit_config(home) as doc:
        for item in entries:
            section, name = item.what.split(".", 1)
            remove_entry(doc[section], name)
            if section == "senses" and doc.get("reflexes"):
                reflexes = doc["reflexes"]
                for i in reversed(range(len(reflexes))):
                    if isinstance(reflexes[i], dict) and reflexes[i].get("sense") == name:
                        remove_entry(reflexes, i)


def _names_with_data(layout: Layout) -> set[str]:
    names = {p.name[:-3] for p in layout.sense_data.glob("*.db")} if layout.sense_data.is_dir() else set()
    archived = layout.archive / "senses"
    if archived.is_dir():
        names |= {p.name for p in archived.iterdir() if p.is_dir()}
    return names


def _has_data(layout: Layout, name: str) -> bool:
    return bool(_data_files(layout, name))


def _data_files(layout: Layout, name: str) -> list[Path]:
    db = layout.sense_db(name)
    candidates = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"), layout.sense_archive(name)]
    return [p for p in candidates if p.exists()]


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _rel(layout: Layout, path: Path) -> str:
    return path.relative_to(layout.home).as_posix()


def _age_text(seconds: float) -> str:
    return format_duration(seconds) if seconds else "0s"


def _floor_age(seconds: float) -> float:
    """The largest whole number of days, hours, minutes or seconds not above `seconds`."""
    for size in (86400, 3600, 60, 1):
        if seconds >= size:
            return (seconds // size) * size
    return 0.0


def _ago(seconds: float) -> str:
    seconds = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"
