"""WorkflowDefinition is generic over the roles' meta: mypy rejects a role returning the wrong meta.

Needs mypy (`pip install mypy`); skipped when it is not installed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mypy")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "tests" / "typecheck"


def mypy(tmp_path: Path, *files: Path) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         f"--cache-dir={tmp_path / 'mypy-cache'}", *map(str, files)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    return [line for line in out.stdout.splitlines() if ": error:" in line]


def test_wrongly_typed_roles_are_type_errors(tmp_path: Path) -> None:
    sample = SAMPLES / "bad_workflow.py"
    expected = {n for n, line in enumerate(sample.read_text().splitlines(), 1) if line.rstrip().endswith("# E")}
    errors = mypy(tmp_path, sample)
    found = {int(m.group(1)) for line in errors if (m := re.search(r":(\d+): error:", line))}
    assert found == expected, "\n".join(errors)


def test_well_typed_workflows_and_the_scaffold_template_check_cleanly(tmp_path: Path) -> None:
    errors = mypy(tmp_path, SAMPLES / "good_workflow.py", ROOT / "templates" / "workflow" / "workflow.py",
                  ROOT / "templates" / "workflow" / "llm_workflow.py")
    assert errors == []
