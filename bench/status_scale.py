"""`nerve status` and `nerve config check` on an instance of 1,000 senses, beside `nerve --help` in the same run.

A running engine holds 1,000 trivial senses in 10 groups (1 h intervals: each
has run once at start and is quiet since). The commands run as real
subprocesses, interleaved so machine noise hits them alike, median of N:
`nerve --help` (the floor: the CLI's own start-up), `nerve status` drawn as a
table and as `--json`, and `nerve config check` (which also imports every
sense in a child to check its code).

Goal: `nerve status` (table and --json) ≤ 2× `nerve --help`.

    .venv/bin/python bench/status_scale.py [-n 7]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import CLI_CWD, Engine, Report, count_logs, engine_env, goal, instance, machine, median, wait_until

SENSES = 1000
GROUPS = 10
TRIVIAL = "def compute(db, peers):\n    return 1\n"


def config() -> str:
    lines = ["senses:"] + [f"  s{i}: {{group: g{i % GROUPS}}}" for i in range(SENSES)]
    lines += ["reflexes:"] + [f"  - {{sense: s{i}, interval: 1h}}" for i in range(SENSES)]
    return "\n".join(lines) + "\n"


def wall_ms(args: list[str]) -> float:
    env = {**engine_env(), "COLUMNS": "160"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nerve_cli", *args], capture_output=True, env=env, cwd=CLI_CWD)
    elapsed = (time.perf_counter() - started) * 1000
    if done.returncode != 0:
        raise SystemExit(f"bench: nerve {' '.join(args)} failed: {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=7, help="runs of each command")
    runs = parser.parse_args().n
    with instance(config(), {f"s{i}": TRIVIAL for i in range(SENSES)}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=GROUPS, timeout=300)
            wait_until(lambda: count_logs(home, "run_complete") >= SENSES, 300, interval=0.5)
            where = ["--home", str(home)]
            commands = {"nerve --help": ["--help"], "nerve status": ["status", *where],
                        "nerve status --json": ["status", "--json", *where],
                        "nerve config check": ["config", "check", *where]}
            times: dict[str, list[float]] = {name: [] for name in commands}
            for args in commands.values():  # warm the page cache and .pyc files
                wall_ms(args)
            for _ in range(runs):
                for name, args in commands.items():
                    times[name].append(wall_ms(args))
    floor = median(times["nerve --help"])
    report = Report(f"{SENSES:,} senses in {GROUPS} groups, median of {runs} ({machine()})")
    report.row("nerve --help", f"{floor:.0f} ms")
    for name in ("nerve status", "nerve status --json", "nerve config check"):
        value = median(times[name])
        judged = name.startswith("nerve status")
        report.row(name, f"{value:.0f} ms", f"--help {floor:.0f} ms ({value / floor:.2f}×)",
                   "≤ 2× --help" if judged else "", value <= 2 * floor if judged else None)
    table, doc = median(times["nerve status"]), median(times["nerve status --json"])
    goal("`nerve status` with 1,000 senses", f"table {table:.0f} / --json {doc:.0f} ms = {max(table, doc) / floor:.2f}×",
         f"`nerve --help` {floor:.0f} ms", "≤ 2× --help", max(table, doc) <= 2 * floor)
    report.print()


if __name__ == "__main__":
    main()
