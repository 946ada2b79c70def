"""Which spans are sampled: the standard `OTEL_TRACES_SAMPLER` / `OTEL_TRACES_SAMPLER_ARG`, decided in the kernel.

The kernel makes its spans without the OpenTelemetry SDK (`spans`), so it decides sampling itself, the way the
SDK's samplers do (opentelemetry.sdk.trace.sampling): `always_on`, `always_off`, `traceidratio` (the 64 low
bits of the trace id below `rate × 2⁶⁴`), and their `parentbased_` forms, which follow a parent's sampled flag
and use the named sampler only for a trace's first span. The default is `parentbased_always_on`; an unknown
sampler (`jaeger_remote`, `xray`: they need a client of their own) or a ratio that is not a number in [0, 1] is
said once at start and the default used instead, as the SDK does.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TRACE_ID_LOW = (1 << 64) - 1
KNOWN = ("always_on", "always_off", "traceidratio", "parentbased_always_on", "parentbased_always_off",
         "parentbased_traceidratio")
DEFAULT = "parentbased_always_on"


@dataclass(frozen=True)
class Sampler:
    name: str
    parent_based: bool
    bound: int  # a root trace id whose low 64 bits are below it is sampled (0: none, 2**64: all)

    def sampled(self, trace_id: int, parent_sampled: bool | None) -> bool:
        """Whether a span of `trace_id` is sampled; `parent_sampled`: its parent's flag (None: a trace's root)."""
        if parent_sampled is not None and self.parent_based:
            return parent_sampled
        return trace_id & TRACE_ID_LOW < self.bound

    @property
    def description(self) -> str:
        return self.name if "ratio" not in self.name else f"{self.name} {self.bound / (1 << 64):g}"


def sampler_from_env(env: Mapping[str, str] = os.environ, warn: Callable[[str], None] = lambda line: None) -> Sampler:
    name = (env.get("OTEL_TRACES_SAMPLER") or DEFAULT).strip().lower()
    if name not in KNOWN:
        warn(f"traces: OTEL_TRACES_SAMPLER={name!r} is not one this engine knows ({', '.join(KNOWN)}); "
             f"using {DEFAULT}")
        name = DEFAULT
    parent_based = name.startswith("parentbased_")
    base = name.removeprefix("parentbased_")
    if base == "always_on":
        return Sampler(name, parent_based, 1 << 64)
    if base == "always_off":
        return Sampler(name, parent_based, 0)
    given = env.get("OTEL_TRACES_SAMPLER_ARG", "")
    try:
        rate = float(given)
        if not 0.0 <= rate <= 1.0:
            raise ValueError(given)
    except ValueError:
        warn(f"traces: OTEL_TRACES_SAMPLER_ARG={given!r} is not a ratio between 0 and 1 for {name}; using 1.0")
        rate = 1.0
    return Sampler(name, parent_based, round(rate * (1 << 64)))
