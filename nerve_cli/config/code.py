"""Check the instance's Python (senses, workflows) in a child process, never in the caller's.

`nerve config check` and `nerve doctor` call this. The child
(`python -m nerve_cli.worker check`) imports each enabled sense and workflow the
way a worker would and reports what would fail to load: syntax and import
errors with file:line, a missing or unusable `compute`, a missing `workflow`,
an async moderator, schema.py out of step with its migrations. User code may
block, print or crash at import: the child is bounded by a timeout and its
output is kept apart from the answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from nerve_cli.config.problems import Problem

TIMEOUT = 60.0  # a sense whose top level blocks (network, input) must not hang the check


def check_code(home: Path, senses: list[str], workflows: list[str], *, timeout: float = TIMEOUT) -> list[Problem]:
    """Problems (errors) found by importing `senses` and `workflows` in a child; [] when all would load."""
    if not senses and not workflows:
        return []
    argv = [sys.executable, "-m", "nerve_cli.worker", "check", "--home", str(home),
            "--senses", ",".join(senses), "--workflows", ",".join(workflows)]
    try:
        done = subprocess.run(argv, cwd=str(home), stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        where = _last_import(exc.stdout)
        if where is None:
            return [Problem("", f"importing the senses and workflows took longer than {timeout:g}s (does a file "
                                "block at import time?); run `nerve config check --fast` to skip this step",
                            file="code check")]
        key = where.rstrip("/").removesuffix(".py").replace("/", ".")  # senses/x/ → senses.x, as other problems
        return [Problem(key, f"did not finish importing within {timeout:g}s: does it block at import time "
                             "(network, input, a loop)? `nerve config check --fast` skips this step", file=where)]
    try:
        answer = json.loads(done.stdout.decode("utf-8", "replace").strip().splitlines()[-1])
    except (IndexError, ValueError):
        tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        return [Problem("", f"the code check child failed (exit {done.returncode}): {' | '.join(tail) or 'no output'}",
                        file="code check")]
    return [_problem(item) for item in answer.get("problems", [])]


def _last_import(stdout: bytes | None) -> str | None:
    """The file the child was importing when it was stopped: its last `{"importing": path}` line."""
    for line in reversed((stdout or b"").decode("utf-8", "replace").splitlines()):
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("importing"), str):
            return item["importing"]
    return None


def _problem(item: dict[str, Any]) -> Problem:
    kind, name = item["kind"], item["name"]
    default = f"senses/{name}/sense.py" if kind == "sense" else f"workflows/{name}.py"
    kind_word = item.get("type") or "Error"
    # Nerve's own error types are the message's category, not news; the user's exception type is.
    shown = item["message"] if kind_word in ("SenseError", "WorkflowError", "SchemaDrift") else f"{kind_word}: {item['message']}"
    return Problem(f"{kind}s.{name}", shown, "error", item.get("line"), file=item.get("file") or default)
