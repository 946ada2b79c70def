"""Hot reload of a large nerve.yaml: saving it → the engine's `config_reloaded`, at 1,000 senses.

The engine holds 1,000 trivial senses in 10 groups (the same instance as
`bench/status_scale.py`: a 52 KB nerve.yaml). Each round changes one reflex's
interval (1h ↔ 2h) and waits for the next `config_reloaded` row; the figure is
the time from the save to that row's own time. What it covers: the watcher's
quiet period, reading and validating the file, comparing the whole
configuration and applying the change. Floor, same run: the same with a
nerve.yaml of one sense (the watcher and the reload's fixed costs).

    .venv/bin/python bench/reload_scale.py [-n 9]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import status_scale
from _kit import Engine, Report, count_logs, instance, machine, median, query, wait_until

SMALL = "senses:\n  s0: {group: g0}\nreflexes:\n  - {sense: s0, interval: 1h}\n"


def reloads(config: str, senses: int, groups: int, rounds: int) -> list[float]:
    """Save → `config_reloaded` (ms) for `rounds` edits of one reflex's interval."""
    with instance(config, {f"s{i}": status_scale.TRIVIAL for i in range(senses)}) as home:
        with Engine(home) as engine:
            engine.wait_ready(groups=groups, timeout=300)
            wait_until(lambda: count_logs(home, "run_complete") >= senses, 300, interval=0.5)
            path, out = home / "nerve.yaml", []
            for n in range(rounds):
                before = count_logs(home, "config_reloaded", "system")
                old, new = ("interval: 1h}", "interval: 2h}") if n % 2 == 0 else ("interval: 2h}", "interval: 1h}")
                text = path.read_text().replace(old, new, 1)
                saved = time.time()
                path.write_text(text)
                if not wait_until(lambda: count_logs(home, "config_reloaded", "system") > before, 30, 0.01):
                    raise SystemExit(f"bench: no config_reloaded within 30 s of edit {n} (engine: {engine.pid})")
                rows = query(home / "data" / "logs.db", "SELECT max(ts) FROM logs WHERE source = 'system' AND "
                                                        "type = 'config_reloaded'")
                out.append(rows[0][0] - saved * 1000)
                time.sleep(0.3)  # the next save is a new batch for the watcher
            return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=9, help="edits of each nerve.yaml")
    rounds = parser.parse_args().n
    floor = reloads(SMALL, 1, 1, rounds)
    large = reloads(status_scale.config(), status_scale.SENSES, status_scale.GROUPS, rounds)
    report = Report(f"save → config_reloaded, median of {rounds} edits ({machine()})")
    report.row("nerve.yaml of one sense", f"{median(floor):.0f} ms")
    report.row(f"nerve.yaml of {status_scale.SENSES:,} senses ({len(status_scale.config()) // 1024} KB)",
               f"{median(large):.0f} ms", f"one sense {median(floor):.0f} ms ({median(large) / median(floor):.1f}×)")
    report.print()


if __name__ == "__main__":
    main()
