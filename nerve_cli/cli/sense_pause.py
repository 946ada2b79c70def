"""`nerve sense pause|resume NAME...|--group G`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete
from nerve_cli.cli.common import HomeOption, JsonOption

Names = Annotated[Optional[list[str]], typer.Argument(help="The senses (or --group).", autocompletion=complete.senses,
                                                      show_default=False)]
Group = Annotated[Optional[str], typer.Option("--group", "-g", help="Every sense of this group.")]


def pause(names: Names = None, group: Group = None, home: HomeOption = None, json_: JsonOption = False) -> None:
    """Pause senses: no compute starts (a running one finishes) and their events wait, until `nerve sense resume`.

    Unlike `nerve sense disable` nothing cascades: listeners, peers and reflexes
    stay as they are, and nerve.yaml is not edited. The pause survives engine
    restarts; with no engine running it is kept for the next one. A person's
    `nerve sense compute` of a paused sense is refused.

    Example: nerve sense pause --group crawlers

    Example: nerve sense pause github-prs ci-runs --json
    """
    _pause_or_resume(names, group, home, json_, resume=False)


def resume(names: Names = None, group: Group = None, home: HomeOption = None, json_: JsonOption = False) -> None:
    """Resume paused senses: each computes once for whatever waited (its events, a missed interval), then as before.

    Example: nerve sense resume --group crawlers
    """
    _pause_or_resume(names, group, home, json_, resume=True)


def _pause_or_resume(names: list[str] | None, group: str | None, home: Path | None, json_: bool, *,
                     resume: bool) -> None:
    from nerve_cli.cli import output
    from nerve_cli.contract.senses import paused
    from nerve_cli.errors import UsageError
    from nerve_cli.home import require_instance
    from nerve_cli.ops.senses.pause import pause_senses

    verb = "resume" if resume else "pause"
    if bool(names) == (group is not None):
        raise UsageError(f"nerve sense {verb}: name the senses or give --group, not both (e.g. `nerve sense {verb} "
                         "--group crawlers`)")
    result = pause_senses(require_instance(home), list(names or []), group, f"nerve sense {verb}", resume=resume)
    if json_:
        output.print_json(paused(result))
        return
    what = {"paused": "no compute starts; its events wait", "resumed": "computes what waited",
            "unchanged": "already paused" if not resume else "was not paused"}
    output.show(output.table(None, ["sense", "status", ""],
                             [[s["sense"], s["status"], what.get(s["status"], "")] for s in result["senses"]]))
    if result["via"] == "offline":
        output.info("no engine is running: kept for the next `nerve run`", style="dim")
