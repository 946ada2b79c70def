"""Config models as document fields: durations (seconds) renamed `<key>_s` by the naming rule.

Found from the pydantic model's own annotations, so a key added to nerve.yaml
later follows the rule without being listed here.
"""

from __future__ import annotations

import typing
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from nerve_cli.config.model import parse_duration


@lru_cache(maxsize=None)
def duration_keys(model: type[BaseModel]) -> frozenset[str]:
    """Fields of a config model whose values are durations (validated by `parse_duration`)."""
    def is_duration(annotation: Any) -> bool:
        if getattr(annotation, "__metadata__", None):
            if any(getattr(m, "func", None) is parse_duration for m in annotation.__metadata__):
                return True
        return any(is_duration(arg) for arg in typing.get_args(annotation))

    hints = typing.get_type_hints(model, include_extras=True)
    return frozenset(name for name in model.model_fields if is_duration(hints.get(name)))


def settings(model: type[BaseModel], values: dict[str, Any]) -> dict[str, Any]:
    """`{"throttle": 5.0, "peers": (...)}` → `{"throttle_s": 5.0, "peers": [...]}`."""
    keys = duration_keys(model)
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, tuple):
            value = list(value)
        out[f"{key}_s" if key in keys else key] = value
    return out
