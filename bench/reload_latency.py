"""Hot reload: time from saving a sense's file to the new code's first compute (median, p90).

A sense on a 100 ms interval returns a version number; each round writes a new
version of sense.py and waits until a signal with that version is stored.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from enginekit import RunningEngine, last_signal, wait_for, write_instance, write_sense  # noqa: E402

ROUNDS = 15


def code(version: int) -> str:
    return f"def compute(db, peers):\n    return {version}\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        write_instance(home, """
            senses:
              edited: {group: g1}
              other: {group: g2}
            reflexes:
              - {sense: edited, interval: 100ms}
              - {sense: other, interval: 100ms}
        """, {"edited": code(0), "other": code(0)})
        times = []
        with RunningEngine(home) as engine:
            engine.wait_ready(groups=2)
            wait_for(lambda: last_signal(home, "edited") == 0, 20)
            for version in range(1, ROUNDS + 1):
                saved = time.perf_counter()
                write_sense(home, "edited", code(version))
                wait_for(lambda: last_signal(home, "edited") == version, 20, interval=0.005)
                times.append((time.perf_counter() - saved) * 1000)
            engine.stop()
    times.sort()
    print(f"save → new code's first signal over {ROUNDS} edits: median {statistics.median(times):.0f} ms, "
          f"p90 {times[int(len(times) * 0.9) - 1]:.0f} ms, min {times[0]:.0f} ms, max {times[-1]:.0f} ms")
    print("  (includes the watcher's batching (100 ms of quiet), the old worker's shutdown, the new worker's start-up "
          "and the 100 ms interval)")


if __name__ == "__main__":
    main()
