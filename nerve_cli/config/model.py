"""The nerve.yaml model: the one source of truth for what a valid config is.

Durations are written as `500ms`, `5s`, `10m`, `2h`, `1d` and held as float seconds.
Names follow `[a-z0-9][a-z0-9._-]*`, at most 64 characters.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
NAME_MAX = 64
DURATION_RE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
HEALTH_SENSE = "nerve-health"


def parse_duration(value: object) -> float:
    """`'500ms'` → 0.5. Bare numbers are refused: a unit makes the intent visible."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"expected a duration like 500ms, 5s, 10m, 2h or 1d, got {value!r}")
    match = DURATION_RE.match(value.strip())
    if not match:
        raise ValueError(f"expected a duration like 500ms, 5s, 10m, 2h or 1d, got {value!r}")
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def format_duration(seconds: float) -> str:
    """0.5 → '500ms', 90 → '90s', 600 → '10m'."""
    for unit in ("d", "h", "m", "s"):
        size = _UNIT_SECONDS[unit]
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{round(seconds * 1000)}ms"


def check_name(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a name (string), got {value!r}")
    if len(value) > NAME_MAX:
        raise ValueError(f"name {value!r} is {len(value)} characters; at most {NAME_MAX} allowed")
    if not NAME_RE.match(value):
        raise ValueError(
            f"name {value!r} is not allowed: use lowercase letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return value


Duration = Annotated[float, BeforeValidator(parse_duration)]
Name = Annotated[str, BeforeValidator(check_name)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineConfig(_Model):
    max_rounds: StrictInt = Field(default=100, ge=1)
    archive_after: Duration = 30 * 86400.0
    shutdown_timeout: Duration = 5.0
    health_interval: Duration = 60.0


class SenseConfig(_Model):
    group: Name = "default"
    throttle: Duration = 0.0
    timeout: Duration = 30.0
    grace_period: Duration | None = None
    peers: tuple[Name, ...] = ()
    enabled: StrictBool = True

    @property
    def grace(self) -> float:
        """Seconds after the soft timeout before the group worker is killed."""
        return self.grace_period if self.grace_period is not None else 3 * self.timeout


class ReflexConfig(_Model):
    sense: Name
    interval: Duration | None = None
    on: tuple[str, ...] = ()
    enabled: StrictBool = True


class WorkflowConfig(_Model):
    concurrency: StrictInt = Field(default=1, ge=1)
    overflow: Literal["drop", "queue"] = "queue"
    max_queue: StrictInt = Field(default=100, ge=1)
    idempotent: StrictBool = False
    drain_timeout: Duration = 30.0
    enabled: StrictBool = True


class NerveConfig(_Model):
    engine: EngineConfig = EngineConfig()
    senses: dict[Name, SenseConfig] = {}
    reflexes: tuple[ReflexConfig, ...] = ()
    workflows: dict[Name, WorkflowConfig] = {}

    def enabled_senses(self) -> dict[str, SenseConfig]:
        return {n: s for n, s in self.senses.items() if s.enabled}

    def groups(self) -> dict[str, list[str]]:
        """Enabled senses by group name, in config order."""
        out: dict[str, list[str]] = {}
        for name, sense in self.enabled_senses().items():
            out.setdefault(sense.group, []).append(name)
        return out

    def active_reflexes(self) -> list[ReflexConfig]:
        """Reflexes that are enabled and point at an enabled sense."""
        live = self.enabled_senses()
        return [r for r in self.reflexes if r.enabled and r.sense in live]

    def channels(self) -> set[str]:
        """External channel names: `on:` entries that are not senses."""
        return {n for r in self.reflexes for n in r.on if n not in self.senses and n != HEALTH_SENSE}
