"""The naming rule for senses, groups and workflows, with no dependencies (workers import it)."""

from __future__ import annotations

import re

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
NAME_MAX = 64


def is_valid_name(value: object) -> bool:
    return isinstance(value, str) and len(value) <= NAME_MAX and bool(NAME_RE.match(value))
