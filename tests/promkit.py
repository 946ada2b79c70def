"""Prometheus in the tests: promtool (installed by `make tools`) and the metric families README documents."""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def promtool() -> str:
    """The promtool `make tools` put beside the venv's python, else the one on PATH."""
    beside = Path(sys.executable).parent / "promtool"
    found = str(beside) if beside.exists() else shutil.which("promtool")
    assert found, "promtool is needed by the tests: `make tools` installs it (from Debian's prometheus package)"
    return found


def documented_families() -> set[str]:
    """The family names in README's Metrics table, as the text parser names them (`nerve_x_total` is family
    `nerve_x`); `nerve_kernel_process_*` is left out."""
    section = README.read_text(encoding="utf-8").split("## Metrics", 1)[1].split("\n## ", 1)[0]
    names = set()
    for row in section.splitlines():
        if row.startswith("| `nerve_"):
            for name in re.findall(r"`(nerve_[a-z_]+)", row.split("|")[1]):
                if not name.endswith("_"):
                    names.add(re.sub(r"_total$", "", name))
    return names
