from __future__ import annotations

from nerve_cli.cli.common import HomeOption, not_available


def init(home: HomeOption = None) -> None:
    """Create a new instance folder: nerve.yaml, example senses, a git repo.

    Example: nerve init --home ~/my-nerve
    """
    not_available("init")
