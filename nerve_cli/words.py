"""Counted nouns in messages: `1 signal`, `2 signals`, `1 reflex`, `3 reflexes`."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """`count word` with the noun agreeing: many defaults to word + 's'."""
    return f"{count} {word if count == 1 else (many or word + 's')}"
