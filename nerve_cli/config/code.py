"""Check the instance's Python (senses, workflows) in a child process, never in the caller's.

`nerve config check` and `nerve doctor` call this. The child
(`python -m nerve_cli.worker check`) imports each enabled sense and workflow the
way a worker would and reports what would fail to load: syntax and import
errors with file:line, a missing or unusable `compute`, a missing `workflow`,
an async moderator, schema.py out of step with its migrations. User code may
block, print or crash at import: the child is bounded by a timeout and its
output is kept apart from the answer.

`nerve config check` starts the child before it has imported and run the
validation (`early_check`): the child picks the senses and workflows from its
own quick read of nerve.yaml, so its start-up overlaps the parent's. Its answer
is used only when the validated config asks for exactly those; otherwise the
check runs again on the validated list.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from nerve_cli.config.code_cache import CodeCache
from nerve_cli.config.problems import Problem, Severity

TIMEOUT = 60.0  # a sense whose top level blocks (network, input) must not hang the check


class CodeCheck:
    """The code check running in its child since it was made: of `senses` and `workflows`, or (None) of
    what the child's own quick read of nerve.yaml names (see `early_check`). With a `cache`, a child's
    answer is kept there; with `start=False` no child is started and the answer comes from the cache."""

    def __init__(self, home: Path, senses: list[str] | None, workflows: list[str] | None,
                 cache: CodeCache | None = None, *, start: bool = True) -> None:
        self.started = time.monotonic()
        self.proc: subprocess.Popen[bytes] | None = None
        self.cache, self.asked, self.from_cache = cache, (senses, workflows), not start
        if not start:
            return
        argv = [sys.executable, "-m", "nerve_cli.worker", "check", "--home", str(home)]
        if senses is None or workflows is None:
            argv.append("--from-config")
        elif senses or workflows:
            argv += ["--senses", ",".join(senses), "--workflows", ",".join(workflows)]
        else:
            return  # nothing to import
        self.proc = subprocess.Popen(argv, cwd=str(home), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)

    def cancel(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.communicate()

    def problems(self, timeout: float = TIMEOUT, expect: tuple[list[str], list[str]] | None = None
                 ) -> list[Problem] | None:
        """Problems (errors) found by importing them; [] when all would load. With `expect`, None when the
        child checked other senses or workflows than those (or, from the cache, when one is not kept)."""
        if self.from_cache:
            kept = self.cache.answer(*expect) if self.cache is not None and expect is not None else None
            return None if kept is None else [_problem(item) for item in kept]
        proc = self.proc
        if proc is None:
            return []
        try:
            stdout, stderr = proc.communicate(timeout=max(0.0, timeout - (time.monotonic() - self.started)))
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, _ = proc.communicate()
            return None if expect is not None and _checked(stdout) != expect else [_timed_out(stdout, timeout)]
        senses, workflows = self.asked
        checked = _checked(stdout) if senses is None or workflows is None else (senses, workflows)
        if expect is not None and checked != expect:
            return None
        try:
            answer = json.loads(stdout.decode("utf-8", "replace").strip().splitlines()[-1])
            items = list(answer["problems"])
        except (IndexError, ValueError, KeyError, TypeError):
            tail = stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            return [Problem("", f"the code check child failed (exit {proc.returncode}): "
                                f"{' | '.join(tail) or 'no output'}", file="code check")]
        if self.cache is not None and checked is not None and proc.returncode == 0:
            self.cache.keep(checked[0], checked[1], items)
        return [_problem(item) for item in items]


def check_code(home: Path, senses: list[str], workflows: list[str], *, timeout: float = TIMEOUT,
               cache: CodeCache | None = None) -> list[Problem]:
    """Problems (errors) found by importing `senses` and `workflows` in a child; [] when all would load.
    With a `cache`: its answer while it holds one for all of them, else the child's, kept there."""
    kept = cache.answer(senses, workflows) if cache is not None else None
    if kept is not None:
        return [_problem(item) for item in kept]
    return CodeCheck(home, senses, workflows, cache).problems(timeout) or []


def early_check(home: Path, *, cache: bool = True) -> CodeCheck:
    """The code check started now, before nerve.yaml is validated, on what the child's quick read of it names;
    with `cache`, no child when the kept answers still hold (see config/code_cache.py)."""
    kept = CodeCache(home) if cache else None
    if kept is not None and kept.answers:
        return CodeCheck(home, None, None, kept, start=False)  # a child only if the config asks for others
    return CodeCheck(home, None, None, kept)


def _checked(stdout: bytes | None) -> tuple[list[str], list[str]] | None:
    """What a `--from-config` child said it checks (its first line)."""
    try:
        first = orjson.loads((stdout or b"").split(b"\n", 1)[0])["checked"]
        return (list(first["senses"]), list(first["workflows"]))
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


def _timed_out(stdout: bytes | None, timeout: float) -> Problem:
    where = _last_import(stdout)
    if where is None:
        return Problem("", f"importing the senses and workflows took longer than {timeout:g}s (does a file "
                           "block at import time?); run `nerve config check --fast` to skip this step",
                       file="code check")
    key = where.rstrip("/").removesuffix(".py").replace("/", ".")  # senses/x/ → senses.x, as other problems
    return Problem(key, f"did not finish importing within {timeout:g}s: does it block at import time "
                        "(network, input, a loop)? `nerve config check --fast` skips this step", file=where)


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
    severity: Severity = "warning" if item.get("severity") == "warning" else "error"
    return Problem(f"{kind}s.{name}", shown, severity, item.get("line"), file=item.get("file") or default)
