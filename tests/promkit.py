"""Prometheus in the tests: promtool (installed by `make tools`) and the metric families the docs list."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

METRICS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "metrics.md"


def promtool() -> str:
    """The promtool `make tools` put beside the venv's python, else the one on PATH."""
    beside = Path(sys.executable).parent / "promtool"
    found = str(beside) if beside.exists() else shutil.which("promtool")
    assert found, "promtool is needed by the tests: `make tools` installs it (from Debian's prometheus package)"
    return found


def documented_families() -> set[str]:
    """The family names in the metrics reference's table (docs/reference/metrics.md), as the text parser names them (`nerve_x_total` is family
    `nerve_x`); `nerve_kernel_process_*` is left out."""
    section = METRICS_PAGE.read_text(encoding="utf-8")
    names = set()
    for row in section.splitlines():
        if row.startswith("| `nerve_"):
            for name in re.findall(r"`(nerve_[a-z_]+)", row.split("|")[1]):
                if not name.endswith("_"):
                    names.add(re.sub(r"_total$", "", name))
    return names
