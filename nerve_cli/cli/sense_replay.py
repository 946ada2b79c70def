
from typing import Annotated

import typer

from nerve_cli.cli.common import HomeOption, JsonOption, SenseName


def replay(
    name: SenseName,
    source: Annotated[str, typer.Option("--source", help="The source to receive again: a sense or channel of its "
                                        "on: list, or a paths: pattern.")],
    start: Annotated[str, typer.Option("--from", help="Event id to start from (0: everything the source holds), or "
                                       "a time: 2h (ago), 2026-08-01, 2026-08-01T12:00.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be delivered again; change nothing.")] = False,
    json_: JsonOption = False,
    home: HomeOption = None,
) -> None:
    """Move a listener's cursor on one source back, so its events are delivered again (rebuild a projection).

    Logged as system/cursor_moved. A running engine runs the listener at once;
    otherwise the next start does. Only moves back; archived events are not
    delivered again.

    Example: nerve sense replay open-tasks --source task.created --from 0
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.ops.senses.replay import replay as run

    done = run(require_instance(home), name, source, start, dry_run=dry_run)
    if json_:
        output.print_json(done.to_json())
        return
    verb = "would move" if done.dry_run else "moved"
    output.info(f"{done.sense}: {verb} its cursor on {done.source} ({done.kind}) from event {done.cursor_before} "
                f"back to {done.cursor_after}: {done.events:,} event(s) to receive"
                + ("" if done.dry_run else f", {'now' if done.delivered == 'now' else 'at the next engine start'}"))
    if done.oldest_held is not None and done.oldest_held > done.cursor_after + 1:
        output.info(f"events before id {done.oldest_held} were archived and are not delivered again", style="yellow")
