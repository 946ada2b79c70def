
from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import FormatOption, HomeOption, JsonOption


def archive(
    home: HomeOption = None,
    older_than: Annotated[Optional[str], typer.Option("--older-than", help="Archive whole UTC days older than this (default engine.archive_after).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would move.")] = False,
    no_vacuum: Annotated[bool, typer.Option("--no-vacuum", help="Skip VACUUM at the end.")] = False,
    repair: Annotated[bool, typer.Option("--repair", help="Also move rows found older than a database's watermark (into part files YYYY-MM-DD.N.jsonl).")] = False,
    json_: JsonOption = False,
    format_: FormatOption = None,
) -> None:
    """Move old log and signal rows into daily JSONL files under data/archive/.

    Safe to run while the engine runs, and safe to interrupt: a crash at any
    point loses and duplicates nothing; the next run carries on.

    Example: nerve archive --older-than 30d --dry-run
    """
    from nerve_cli.cli import archive_view, output
    from nerve_cli.config.model import parse_duration
    from nerve_cli.home import require_instance
    from nerve_cli.store.archive import archive as run_archive

    json_ = output.use_format(format_, json_) == "json"
    home_path = require_instance(home)
    if older_than is None:
        from nerve_cli.config.load import load_config

        seconds = load_config(home_path).engine.archive_after
    else:
        try:
            seconds = parse_duration(older_than)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--older-than") from None
    with archive_view.progress(enabled=not (dry_run or json_)) as on_progress:
        report = run_archive(
            home_path, older_than_s=seconds, dry_run=dry_run, vacuum=not no_vacuum,
            progress=on_progress, repair=repair,
        )
    if json_:
        from nerve_cli.contract.instance import archive as archive_document

        output.print_json(archive_document(report))
    else:
        archive_view.summary(home_path, report)
    if not report.ok:
        raise typer.Exit(1)
