"""Fuzz: seeded mutants of the template nerve.yaml through `nerve config check` and a running engine's reload.

Every mutant must end in exit 0 or 1 with no traceback within a per-case
timeout, and, saved into a running engine's nerve.yaml, in one reload outcome
(reloaded, rejected or unchanged) after which the engine answers `status`.
`NERVE_FUZZ_SEED`, `NERVE_FUZZ_CASES` and `NERVE_FUZZ_ENGINE_CASES` replay or
widen a run; a failure names the seed and index, and
`configfuzz.mutant(seed, index)` rebuilds it.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import time
from collections import Counter
from pathlib import Path

import configfuzz
import pytest
from enginekit import RunningEngine, wait_for
from loadclock import scaled
from typer.testing import CliRunner

from nerve_cli.cli.app import app
from nerve_cli.ops.client import request

SEED = int(os.environ.get("NERVE_FUZZ_SEED", "17"))
CASES = int(os.environ.get("NERVE_FUZZ_CASES", "600"))
CASE_TIMEOUT = 10.0
TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance"


class Hung(Exception):
    pass


def _alarm(signum, frame):
    raise Hung()


CHECK_SHARDS = 3  # side by side in the suite's test processes


@pytest.mark.parametrize("shard", range(CHECK_SHARDS))
def test_config_fuzz_check_survives_every_mutant(home: Path, shard: int) -> None:
    shutil.copytree(TEMPLATE, home)
    runner = CliRunner()
    failures: list[str] = []
    outcomes: Counter[str] = Counter()
    slowest = 0.0
    previous = signal.signal(signal.SIGALRM, _alarm)
    previous_timer = signal.getitimer(signal.ITIMER_REAL)  # the per-test timeout's tick (conftest)
    started = time.monotonic()
    try:
        for index in range(shard, CASES, CHECK_SHARDS):
            kind, data = configfuzz.mutant(SEED, index)
            (home / "nerve.yaml").write_bytes(data)
            case_started = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, scaled(CASE_TIMEOUT))
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
        signal.setitimer(signal.ITIMER_REAL, *previous_timer)
    print(f"\nconfig fuzz, shard {shard}: {len(range(shard, CASES, CHECK_SHARDS))} of {CASES} mutants (seed {SEED}) in {time.monotonic() - started:.1f}s, "
          f"slowest {slowest:.2f}s; {dict(outcomes)}")
    assert not failures, "\n".join(failures[:20])
    assert outcomes["valid"] and outcomes["invalid"]  # the mutants reach both sides of the validator


# Each reload waits for the file watcher (~0.25 s a case), so the mutants are dealt to four engines,
# one test each, which the suite's test processes run side by side. NERVE_FUZZ_ENGINE_CASES=N saves
# a seeded sample of N of them instead.
ENGINE_CASES = int(os.environ.get("NERVE_FUZZ_ENGINE_CASES", str(CASES)))
ENGINE_SHARDS = 4
RELOAD_TIMEOUT = 15.0
RELOADS = ("config_reloaded", "config_rejected", "config_unchanged")


def _reloads(home: Path) -> int:
    """Reload outcomes logged so far: one count, polled every 10 ms (reading every row each time, as this did,
    grew with the cases and took the engine's CPU on a loaded machine)."""
    path = home / "data" / "logs.db"
    if not path.exists():
        return 0
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        marks = ", ".join("?" for _ in RELOADS)
        return conn.execute(f"SELECT count(*) FROM logs WHERE source = 'system' AND type IN ({marks})",
                            RELOADS).fetchone()[0]
    except sqlite3.OperationalError:
        return 0
    finally:
        conn.close()


@pytest.mark.parametrize("shard", range(ENGINE_SHARDS))
def test_config_fuzz_engine_reload_survives_every_mutant(home: Path, shard: int) -> None:
    """Each mutant saved into a running engine's nerve.yaml: one reload outcome each, and `status` answers."""
    shutil.copytree(TEMPLATE, home)
    failures: list[str] = []
    started = time.monotonic()
    slowest = 0.0
    cases = sorted(random.Random(SEED).sample(range(CASES), min(ENGINE_CASES, CASES)))[shard::ENGINE_SHARDS]
    with RunningEngine(home) as engine:
        engine.wait_ready()
        for index in cases:
            kind, data = configfuzz.mutant(SEED, index)
            seen = _reloads(home)
            case_started = time.monotonic()
            (home / "nerve.yaml").write_bytes(data)
            try:
                wait_for(lambda: _reloads(home) > seen, RELOAD_TIMEOUT, interval=0.01, what="the reload")
                status = request(home, "status", timeout=scaled(RELOAD_TIMEOUT))
            except Exception as exc:  # a hang or a dead socket: the case fails, and we say which
                failures.append(f"seed {SEED} case {index} ({kind}): {exc}")
                if engine.proc.poll() is not None or len(failures) > 5:
                    break
                continue
            slowest = max(slowest, time.monotonic() - case_started)
            if status.get("pid") != engine.proc.pid:
                failures.append(f"seed {SEED} case {index} ({kind}): status answered {status!r:.200}")
        code, output = engine.stop()
    took = time.monotonic() - started
    print(f"\nengine reload fuzz, shard {shard}: {len(cases)} of the {CASES} mutants (seed {SEED}) in {took:.1f}s, "
          f"slowest {slowest:.2f}s")
    assert not failures, "\n".join(failures)
    assert code == 0 and "Traceback" not in output, output[-3000:]
