from __future__ import annotations

from typing import Annotated

import typer

from nerve_cli.cli.common import HomeOption, JsonOption


def gc(
    older_than: Annotated[str, typer.Option("--older-than", help="Only what has been deleted or untouched this long.")] = "30d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed; remove nothing.")] = False,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Offline clean-up: remove old attic entries, data of deleted or disabled senses, unreferenced blobs.

    Lists, then removes: attic/ entries deleted more than --older-than ago;
    data/senses/NAME.db (and its archive) of senses deleted that long ago, of
    disabled senses untouched that long, and of names nerve.yaml no longer
    has; the nerve.yaml entry of a deleted sense or workflow once nothing of it
    is left (unless another entry still names it); blobs in data/blobs/ whose
    sha256 no row, signal, log payload, event or archived day holds, unwritten
    that long. Refused while an engine runs (except --dry-run). One commit for
    what git tracks. Says how many newer items it keeps, when they become
    collectable, and the --older-than that would take them now.

    Example: nerve gc --older-than 7d --dry-run
    """
    from nerve_cli.cli import output
    from nerve_cli.config.model import parse_duration
    from nerve_cli.home import require_instance
    from nerve_cli.ops.gc import collect

    try:
        seconds = parse_duration(older_than)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--older-than") from None
    result = collect(require_instance(home), seconds, dry_run=dry_run)
    if json_:
        from nerve_cli.contract.instance import gc as document

        output.print_json(document(result))
        return
    if not result.items:
        output.info(f"nothing to collect older than {older_than}")
    else:
        rows = [(g.kind, g.what, g.why, _size(g.bytes) if g.bytes else "") for g in result.items]
        title = "would remove" if dry_run else "removed"
        output.show(output.table(f"{title} ({_size(result.freed)})", ["kind", "what", "why", "size"], rows))
    for line in result.kept:
        output.info(line, style="yellow")
    if result.sha:
        output.info(f"committed {result.sha[:8]}", style="dim")
    if result.young:
        output.info(_young(result, older_than), style="dim")
    if dry_run and result.items:
        output.info("dry run: nothing was removed", style="dim")


def _young(result, older_than: str) -> str:
    """`kept 2 newer than 30d (1 attic entry, 1 data): collectable from …, all by …; --older-than 2d takes them now`."""
    from collections import Counter

    from nerve_cli.cli import output
    from nerve_cli.config.model import format_duration
    from nerve_cli.words import plural

    kinds = Counter(y.kind for y in result.young)
    parts = [plural(kinds["attic"], "attic entry", "attic entries")] if kinds["attic"] else []
    parts += [f"{kinds['data']} data"] if kinds["data"] else []
    parts += [plural(kinds["blob"], "blob", "blobs")] if kinds["blob"] else []
    first, last = (f(y.collectable_at for y in result.young) for f in (min, max))
    when = f"collectable from {output.when(first * 1000)}"
    if round(last) != round(first):
        when += f", all by {output.when(last * 1000)}"
    take = format_duration(result.takes_young) if result.takes_young else "0s"
    them = "it" if len(result.young) == 1 else "them"
    return (f"kept {len(result.young)} newer than {older_than} ({', '.join(parts)}): {when}; "
            f"`--older-than {take}` takes {them} now")


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"
