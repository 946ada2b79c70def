"""`nerve sense disable|enable`: soft delete with the cascade (the logic is in nerve_cli.config.lifecycle)."""


from typing import TYPE_CHECKING, Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, JsonOption, SenseName

if TYPE_CHECKING:
    from nerve_cli.config.lifecycle import Item, Outcome

Name = SenseName


def disable(
    name: Name,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what the cascade would touch.")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Disable a sense and everything that depends on it (nothing is deleted).

    Also turns off the reflexes that trigger it or listen to it and the senses
    that read it as a peer (and theirs), each marked `# nerve: disabled with
    NAME` in nerve.yaml. One edit, one commit; a running engine reloads it.

    Example: nerve sense disable disk-usage --dry-run
    """
    from nerve_cli.config.lifecycle import disable_sense
    from nerve_cli.home import require_instance

    outcome = disable_sense(require_instance(home), name, dry_run=dry_run)
    if json_:
        _json(outcome)
        return
    _render_disable(outcome)


def enable(
    name: Name,
    cascade: Annotated[bool, typer.Option("--cascade", help="Also bring back what `sense disable NAME` turned off.")] = False,
    reflex: Annotated[Optional[list[int]], typer.Option("--reflex", metavar="N", help="Also enable reflexes[N] of this sense (repeatable).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would change.")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Enable a sense again; says what the earlier cascade still keeps off.

    Only NAME is turned on. `--cascade` also brings back exactly what
    `nerve sense disable NAME` turned off (found by its marker comment).

    Example: nerve sense enable disk-usage --cascade
    """
    from nerve_cli.config.lifecycle import enable_sense
    from nerve_cli.home import require_instance

    outcome = enable_sense(require_instance(home), name, cascade=cascade, reflexes=tuple(reflex or ()), dry_run=dry_run)
    if json_:
        _json(outcome)
        return
    _render_enable(outcome)


def _json(outcome: "Outcome") -> None:
    from nerve_cli.cli import output
    from nerve_cli.contract.senses import lifecycle

    output.print_json(lifecycle(outcome, bring_back))


def bring_back(item: "Item") -> str:
    """The exact command that turns one cascade-disabled item back on (config.lifecycle says it)."""
    from nerve_cli.config.lifecycle import bring_back as command  # here: config.lifecycle loads ruamel

    return command(item)


def _render_disable(outcome: "Outcome") -> None:
    from nerve_cli.cli import output

    plan = outcome.plan
    if not plan.change_target:
        by = f" (by the cascade of `nerve sense disable {plan.was_marked}`)" if plan.was_marked else ""
        output.info(f"sense {plan.name} is already disabled{by}; nothing changed")
        return
    rows = [[f"sense {plan.name}", "asked for"], *[[i.what, i.why] for i in plan.items]]
    cascade = f" and {len(plan.items)} more by cascade" if plan.items else ""
    _table(f"disable sense {plan.name}{cascade}:", ["what", "why"], rows)
    if outcome.dry_run:
        output.info("dry run: nerve.yaml is unchanged", style="dim")
        return
    _written(outcome, f"disabled sense {plan.name}{cascade}")
    if plan.items:
        output.info(f"marked `# nerve: disabled with {plan.name}` in nerve.yaml; "
                    f"bring them back with `nerve sense enable {plan.name} --cascade`")


def _render_enable(outcome: "Outcome") -> None:
    from nerve_cli.cli import output

    plan = outcome.plan
    for warning in plan.warnings:
        output.warn(warning)
    if not plan.change_target:
        output.info(f"sense {plan.name} is already enabled")
    if plan.items:
        title = f"{'would bring' if outcome.dry_run else 'brought'} back with sense {plan.name}:"
        _table(title, ["what", "why it was off"], [[i.what, i.why] for i in plan.items])
    for item, root in plan.kept_off:
        output.info(f"{item.what} stays off: it still depends on a disabled sense; "
                    f"it comes back with `nerve sense enable {root} --cascade`", style="yellow")
    if outcome.dry_run:
        output.info("dry run: nerve.yaml is unchanged", style="dim")
    elif outcome.written:
        restored = f" and {len(plan.items)} more it had turned off" if plan.items else ""
        _written(outcome, f"enabled sense {plan.name}{restored}" if plan.change_target
                 else f"brought back {len(plan.items)} that `nerve sense disable {plan.name}` had turned off")
    _render_still_off(plan.still_off)


def _render_still_off(items: "list[tuple[Item, str]]") -> None:
    from nerve_cli.cli import output

    for root in dict.fromkeys(root for _, root in items):
        rows = [[i.what, i.why, bring_back(i)] for i, r in items if r == root]
        _table(f"still off since `nerve sense disable {root}` (never turned back on silently):",
               ["what", "why", "bring back with"], rows)
        output.info(f"or all of them at once: nerve sense enable {root} --cascade")


def _table(title: str, columns: list[str], rows: list[list[str]]) -> None:
    from nerve_cli.cli import output

    output.show(output.table(title, columns, rows))  # titles and cells are text, never Rich markup


def _written(outcome: "Outcome", what: str) -> None:
    from nerve_cli.cli import output

    output.notes(outcome.notes)
    committed = f"; committed {outcome.sha[:8]}" if outcome.sha else ""
    output.info(f"{what}{committed}", style="green")
    engine_note(outcome)


def engine_note(outcome: "Outcome") -> None:
    """Say that a running engine takes the change by itself (hot reload), when one runs."""
    from nerve_cli.cli import output
    from nerve_cli.ops.client import engine_running

    if outcome.home is not None and engine_running(outcome.home):
        output.info("the running engine applies it within a second (hot reload of nerve.yaml)", style="dim")
