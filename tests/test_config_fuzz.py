"""Fuzz: seeded mutants of the template nerve.yaml through `nerve config check`.

Every mutant must end in exit 0 or 1 with no traceback, within a per-case
timeout. `NERVE_FUZZ_SEED` and `NERVE_FUZZ_CASES` replay or widen a run; a
failure names the seed and index, and `configfuzz.mutant(seed, index)` rebuilds it.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

import configfuzz
from nerve_cli.cli.app import app

SEED = int(os.environ.get("NERVE_FUZZ_SEED", "17"))
CASES = int(os.environ.get("NERVE_FUZZ_CASES", "600"))
CASE_TIMEOUT = 10.0
TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance"


class Hung(Exception):
    pass


def _alarm(signum, frame):
    raise Hung()


def test_config_fuzz_check_survives_every_mutant(home: Path) -> None:
    shutil.copytree(TEMPLATE, home)
    runner = CliRunner()
    failures: list[str] = []
    outcomes: Counter[str] = Counter()
    slowest = 0.0
    previous = signal.signal(signal.SIGALRM, _alarm)
    started = time.monotonic()
    try:
        for index in range(CASES):
            kind, data = configfuzz.mutant(SEED, index)
            (home / "nerve.yaml").write_bytes(data)
            case_started = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, CASE_TIMEOUT)
            try:
                result = runner.invoke(app, ["config", "check", "--json"])
            except Hung:
                failures.append(f"seed {SEED} case {index} ({kind}): no answer within {CASE_TIMEOUT:g}s")
                continue
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            slowest = max(slowest, time.monotonic() - case_started)
            crashed = result.exception is not None and not isinstance(result.exception, SystemExit)
            if crashed or result.exit_code not in (0, 1) or "Traceback" in result.output:
                failures.append(f"seed {SEED} case {index} ({kind}): exit {result.exit_code}, "
                                f"{result.exception!r}: {result.output[-300:]}")
            outcomes["valid" if result.exit_code == 0 else "invalid"] += 1
    finally:
        signal.signal(signal.SIGALRM, previous)
    print(f"\nconfig fuzz: {CASES} mutants (seed {SEED}) in {time.monotonic() - started:.1f}s, "
          f"slowest {slowest:.2f}s; {dict(outcomes)}")
    assert not failures, "\n".join(failures[:20])
    assert outcomes["valid"] and outcomes["invalid"]  # the mutants reach both sides of the validator
