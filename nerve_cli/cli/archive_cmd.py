from __future__ import annotations

from typing import Annotated, Optional

import typer

from nerve_cli.cli.common import HomeOption, not_available


def archive(
    home: HomeOption = None,
    older_than: Annotated[Optional[str], typer.Option("--older-than", help="Archive whole UTC days older than this (default engine.archive_after).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only show what would move.")] = False,
    no_vacuum: Annotated[bool, typer.Option("--no-vacuum", help="Skip VACUUM at the end.")] = False,
) -> None:
    """Move old log and signal rows into daily JSONL files under data/archive/.

    Example: nerve archive --older-than 30d --dry-run
    """
    not_available("archive")
