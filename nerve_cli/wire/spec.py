"""What a sense worker needs from nerve.yaml, handed over by whoever spawns it.

The kernel already holds the validated config; passing the group's slice as
JSON on the command line spares every worker from importing pydantic and
ruamel and re-reading nerve.yaml (about 11 MiB of resident memory each).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nerve_cli.config.model import NerveConfig

DEFAULT_SHUTDOWN_TIMEOUT = 5.0


@dataclass(frozen=True)
class GroupSpec:
    senses: dict[str, tuple[str, ...]]  # sense → the peers it may read, in load order
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    # the peers among those that are lazy (read brings them up to date) → the parameters a read of them binds
    lazy: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # sense → (the schema version its signals carry, whether they carry a content hash), for senses that say
    signals: dict[str, tuple[str | None, bool]] = field(default_factory=dict)

    @classmethod
    def from_config(cls, config: "NerveConfig", group: str, only: list[str] | None = None) -> "GroupSpec":
        # imported here: a worker reads its spec from JSON and never loads the config package
        from nerve_cli.config.projection import readings

        names = list(dict.fromkeys(only)) if only is not None else config.sense_groups().get(group, [])
        senses = {n: tuple(config.senses[n].peers) if n in config.senses else () for n in names}
        read = readings(config)
        lazy = {p: read[p].params for peers in senses.values() for p in peers if p in read and read[p].is_lazy}
        signals = {n: (s.signal_version, s.signal_hash) for n in names
                   if (s := config.senses.get(n)) is not None and (s.signal_version is not None or s.signal_hash)}
        return cls(senses, config.engine.shutdown_timeout, lazy, signals)

    def to_json(self) -> str:
        return json.dumps({"senses": {n: list(p) for n, p in self.senses.items()},
                           "shutdown_timeout": self.shutdown_timeout, "lazy": {n: list(p) for n, p in self.lazy.items()},
                           **({"signals": {n: list(v) for n, v in self.signals.items()}} if self.signals else {})})

    @classmethod
    def from_json(cls, text: str) -> "GroupSpec":
        data = json.loads(text)
        return cls({n: tuple(p) for n, p in data["senses"].items()}, float(data["shutdown_timeout"]),
                   {n: tuple(p) for n, p in data.get("lazy", {}).items()},
                   {n: (v[0], bool(v[1])) for n, v in data.get("signals", {}).items()})
