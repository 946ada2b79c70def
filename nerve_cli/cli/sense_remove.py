"""`nerve sense delete|rename` and `nerve workflow delete` (the logic is in senses.remove and senses.rename)."""

from __future__ import annotations

from typing import Annotated

import typer

from nerve_cli.cli.common import HomeOption, JsonOption, SenseName, WorkflowName

Name = SenseName
DryRun = Annotated[bool, typer.Option("--dry-run", help="Only show what would change.")]


def delete(name: Name, dry_run: DryRun = False, home: HomeOption = None, json_: JsonOption = False) -> None:
    """Delete a sense softly: disable it with its cascade and move its folder to attic/.

    Its nerve.yaml entry stays (`enabled: false`), its data stays under data/;
    one commit. To restore it, move the folder back and `nerve sense enable`
    it; `nerve gc` removes old attic entries and data.

    Example: nerve sense delete disk-usage --dry-run
    """
    from nerve_cli.home import require_instance
    from nerve_cli.ops.senses.remove import delete_sense

    _render(delete_sense(require_instance(home), name, dry_run=dry_run), json_)


def delete_workflow(name: WorkflowName, dry_run: DryRun = False,
                    home: HomeOption = None, json_: JsonOption = False) -> None:
    """Delete a workflow softly: disable it and move its file to attic/ (one commit).

    Directives for it are refused from then on; its threads stay in the log.

    Example: nerve workflow delete cleanup
    """
    from nerve_cli.home import require_instance
    from nerve_cli.ops.senses.remove import delete_workflow as run

    _render(run(require_instance(home), name, dry_run=dry_run), json_)


def rename(old: SenseName,
           new: Annotated[str, typer.Argument(help="New sense name.")],
           home: HomeOption = None, json_: JsonOption = False) -> None:
    """Rename a sense: folder, database, archive and every nerve.yaml reference, in one commit.

    Peers lists, reflexes' `sense:` and `on:` and cascade markers follow. With
    an engine running, the old sense is stopped through hot reload first and
    the new one starts after. Code naming the old sense as a string is listed.

    Example: nerve sense rename cpu cpu-usage
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ops.senses.rename import rename_sense

    result = rename_sense(require_instance(home), old, new)
    if json_:
        from nerve_cli.contract.instance import renamed

        output.print_json(renamed(result))
        return
    output.notes(result.notes)
    committed = f"; committed {result.sha[:8]}" if result.sha else ""
    output.info(f"renamed sense {result.old} → {result.new}{committed}", style="green")
    for line in result.moved:
        output.info(f"  moved {line}")
    for listener in result.cursors:  # it goes on from the event it had reached, not from OLD's first
        output.info(f"  cursor of {listener}: on {result.old} → on {result.new}")
    for line in result.config:
        output.info(f"  nerve.yaml: {line}")
    if result.engine:
        output.info("the running engine stopped the old sense and starts the new one (hot reload)", style="dim")
    for where in result.mentions:
        output.warn(f"{where} names `{result.old}` as a string: rename it there by hand")


def _render(deleted, json_: bool) -> None:
    from nerve_cli.cli import output
    from nerve_cli.cli.sense_lifecycle import _table

    plan, home = deleted.plan, deleted.moved_from.parents[1]
    src, dst = (p.relative_to(home) for p in (deleted.moved_from, deleted.moved_to))
    if json_:
        from nerve_cli.contract.instance import deleted as document

        output.print_json(document(deleted, home))
        return
    verb = "would delete" if deleted.dry_run else "deleted"
    output.notes(deleted.notes)
    if plan.items:
        _table(f"{verb} {deleted.kind} {deleted.name}; also turned off by cascade:", ["what", "why"],
               [[i.what, i.why] for i in plan.items])
    committed = f"; committed {deleted.sha[:8]}" if deleted.sha else ""
    output.info(f"{verb} {deleted.kind} {deleted.name}: {src} → {dst}{committed}", style="dim" if deleted.dry_run else "green")
    if deleted.dry_run:
        output.info("dry run: nothing changed", style="dim")
        return
    data = "; its data stays under data/ until `nerve gc`" if deleted.kind == "sense" else ""
    output.info(f"nerve.yaml keeps it as `enabled: false`{data}; to restore it, move {dst} back to {src}, "
                f"then `nerve {deleted.kind} enable {deleted.name}`")
