"""`nerve sense delete` and `nerve workflow delete`: soft deletes (nothing is destroyed: it goes to the attic).

Deleting a sense disables it with its cascade (exactly as `nerve sense disable`),
then moves `senses/NAME/` to `attic/senses/NAME.<UTC stamp>/`. Its entry stays in
nerve.yaml, `enabled: false`, so everything that names it still validates; its
database and archive stay under data/. One commit holds the nerve.yaml edit
and the move. A workflow is disabled and its file moved to
`attic/workflows/NAME.<stamp>.py`. `nerve gc` removes what has been in the
attic (and the data of deleted or long-disabled senses) for longer than an age.

A running engine applies the nerve.yaml edit by hot reload; nerve.yaml is
written before the files move, so the engine lets go of the sense first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from nerve_cli.config.lifecycle import check_sense, check_workflow, load_for_edit, plan_disable, plan_workflow, write_plan
from nerve_cli.errors import NerveError
from nerve_cli.home import Layout
from nerve_cli.instance.attic import attic_entries, new_attic_path
from nerve_cli.instance.change import Change


@dataclass
class Deleted:
    kind: str  # sense | workflow
    name: str
    moved_from: Path
    moved_to: Path
    plan: object  # lifecycle.Plan: what the disable turned off
    dry_run: bool = False
    sha: str | None = None
    notes: list[str] = field(default_factory=list)


def delete_sense(home: Path, name: str, *, dry_run: bool = False) -> Deleted:
    """Disable `name` with its cascade, move its folder to the attic, commit both as one change."""
    layout = Layout(home)
    text, config, found = load_for_edit(home)
    check_sense(config, name)
    folder = layout.sense_dir(name)
    if not folder.is_dir():
        raise NerveError(_already(layout, "sense", name, f"senses/{name}/"))
    plan = plan_disable(config, name, found)
    target = new_attic_path(layout, "sense", name)
    deleted = Deleted("sense", name, folder, target, plan, dry_run)
    if dry_run:
        return deleted
    cascade = f"(+{len(plan.items)} by cascade)" if plan.items else ""
    return _delete(home, deleted, text, cascade)


def delete_workflow(home: Path, name: str, *, dry_run: bool = False) -> Deleted:
    """Disable workflow `name` (no cascade) and move its file to the attic, as one commit."""
    layout = Layout(home)
    text, config, _ = load_for_edit(home)
    check_workflow(config, name)
    path = layout.workflow_file(name)
    if not path.is_file():
        raise NerveError(_already(layout, "workflow", name, f"workflows/{name}.py"))
    deleted = Deleted("workflow", name, path, new_attic_path(layout, "workflow", name, ".py"),
                      plan_workflow(config, name, False), dry_run)
    return deleted if dry_run else _delete(home, deleted, text, "")


def _delete(home: Path, deleted: Deleted, text: str, detail: str) -> Deleted:
    layout = Layout(home)
    change = Change(home, f"{deleted.kind} delete {deleted.name}", [layout.config, deleted.moved_from, deleted.moved_to])
    change.protect()  # hand edits of nerve.yaml or of the files being moved get their own commit first
    deleted.notes = change.notes()
    if deleted.plan.changes:  # type: ignore[attr-defined]
        write_plan(home, text, deleted.plan)  # type: ignore[arg-type]
    deleted.moved_to.parent.mkdir(parents=True, exist_ok=True)
    os.rename(deleted.moved_from, deleted.moved_to)
    deleted.sha = change.commit(detail=detail)
    return deleted


def _already(layout: Layout, kind: str, name: str, where: str) -> str:
    previous = attic_entries(layout, kind, name)
    if previous:
        shown = previous[-1].relative_to(layout.home)
        return (f"{kind} `{name}` is already deleted: {where} is not there and the attic holds {shown}; "
                f"move it back to {where.rstrip('/')} to restore it (then `nerve {kind} enable {name}`)")
    return f"{where} does not exist, so there is nothing to move to the attic; set `enabled: false` to turn it off"
