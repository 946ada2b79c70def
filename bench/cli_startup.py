"""CLI start-up: `nerve --help` and `nerve config check` against the `import typer, rich` floor.

Runs the three commands interleaved (so machine noise hits them alike), N times
each, as real subprocesses, and prints the median wall time of each and its
ratio to the floor. Target: ≤ 1.3× for `nerve --help`. `nerve config check`
runs with the code check's kept answer (the warm-up run made it, as an earlier
check would have), `--no-cache` imports the senses again, `--fast` skips them. Also lists any heavy
module (sqlite_utils, git, watchfiles, the engine) that `config check` imports:
there should be none.

    python bench/cli_startup.py [-n 15]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _kit import goal

HEAVY = ("sqlite_utils", "git", "watchfiles", "nerve_cli.kernel", "nerve_cli.store", "asyncio")

# typer 0.29 builds a pydantic TypeAdapter for every parameter of the command it
# runs, so any command (unlike --help) pays for importing pydantic. This no-op
# command with the same options as `config check` shows that share.
NOOP_COMMAND = """
from pathlib import Path
from typing import Annotated, Optional
import typer
app = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
@app.command()
def check(home: Annotated[Optional[Path], typer.Option("--home")] = None,
          json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    \"\"\"Does nothing.\"\"\"
app()
"""


def nerve_command() -> list[str]:
    script = Path(sys.executable).with_name("nerve")
    return [str(script)] if script.exists() else [sys.executable, "-m", "nerve_cli"]


def fresh_instance(root: Path) -> Path:
    from nerve_cli.instance.scaffold import create_instance

    home = root / "instance"
    create_instance(home)
    return home


def wall_ms(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.decode()[-400:]}")
    return elapsed


def heavy_imports(cmd: list[str], env: dict[str, str]) -> list[str]:
    """Top-level packages from HEAVY that `cmd` imports (via -X importtime)."""
    argv = [sys.executable, "-X", "importtime", "-m", "nerve_cli", *cmd]
    err = subprocess.run(argv, env=env, capture_output=True, text=True).stderr
    names = {line.split("|")[-1].strip() for line in err.splitlines() if line.startswith("import time:")}
    return sorted(n for n in names if any(n == h or n.startswith(h + ".") for h in HEAVY))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=15, help="runs of each command")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nerve-bench-"))
    try:
        home = fresh_instance(root)
        # the code check's kept answers go to a cache of this run's own (the timed runs use it, as a re-run would)
        env = {**os.environ, "NO_COLOR": "1", "NERVE_HOME": str(home), "XDG_CACHE_HOME": str(root / "cache")}
        nerve = nerve_command()
        noop = root / "noop_command.py"
        noop.write_text(NOOP_COMMAND)
        commands = {
            "import typer, rich (floor)": [sys.executable, "-c", "import typer, rich"],
            "nerve --help": [*nerve, "--help"],
            "typer no-op command": [sys.executable, str(noop), "--home", str(home)],
            "nerve config check": [*nerve, "config", "check", "--home", str(home)],
            "nerve config check --no-cache": [*nerve, "config", "check", "--no-cache", "--home", str(home)],
            "nerve config check --fast": [*nerve, "config", "check", "--fast", "--home", str(home)],
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        for cmd in commands.values():  # warm the page cache and .pyc files
            wall_ms(cmd, env)
        for _ in range(args.n):
            for name, cmd in commands.items():
                times[name].append(wall_ms(cmd, env))
        floor = statistics.median(times["import typer, rich (floor)"])
        print(f"CLI start-up, median of {args.n} runs each (interleaved), {sys.executable}")
        for name, samples in times.items():
            median = statistics.median(samples)
            print(f"  {name:<30} {median:7.1f} ms   {median / floor:4.2f}× floor")
        heavy = heavy_imports(["config", "check", "--home", str(home)], env)
        print(f"  heavy modules imported by `config check`: {', '.join(heavy) or 'none'}")
        check = statistics.median(times["nerve config check"])
        cold = statistics.median(times["nerve config check --no-cache"])
        goal("`nerve config check`", f"{check:.0f} ms = {check / floor:.2f}× the floor "
             f"(--no-cache {cold:.0f} ms = {cold / floor:.2f}×)",
             f"`import typer, rich` {floor:.0f} ms", "≤ 3×", check <= 3 * floor)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
