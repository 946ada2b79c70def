"""The kernel loads `nats` only when nerve.yaml has a fleet and `opentelemetry` only when traces are switched on;
nothing else in Nerve imports them.

A real engine runs under `python -X importtime` (every module it loads is listed on stderr), once without a
`fleet:` section and once with one, so the check can fail.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from enginekit import write_instance
from loadclock import scaled

ROOT = Path(__file__).resolve().parents[1] / "nerve_cli"
REMOTE = ("nats", "opentelemetry")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        found.update(n.split(".")[0] for n in names)
    return found


def test_only_the_fleet_package_imports_nats_and_only_the_trace_package_opentelemetry() -> None:
    for package, room in (("nats", "kernel/fleet/"), ("opentelemetry", "kernel/trace/")):
        importers = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.py") if package in _imports(p))
        assert importers and all(p.startswith(room) for p in importers), (package, importers)


def _loaded_by_engine(home: Path) -> set[str]:
    """Top-level packages a real engine imported while running for a moment (its workers are other processes)."""
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "nerve_cli", "run", "--home", str(home),
                          "--for", "1s", "--no-watch"], capture_output=True, text=True, timeout=scaled(60))
    assert out.returncode == 0, out.stdout + out.stderr[-3000:]
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert "nerve_cli" in loaded  # importtime lines were read
    return loaded


def test_an_engine_without_a_fleet_imports_neither_nats_nor_opentelemetry(tmp_path: Path) -> None:
    sense = {"tick": "def compute(db, peers):\n    return 1\n"}
    plain = write_instance(tmp_path / "plain", """
        senses:
          tick: {}
        reflexes:
          - {sense: tick, interval: 100ms}
    """, sense)
    assert not _loaded_by_engine(plain) & set(REMOTE)
    with_fleet = write_instance(tmp_path / "fleet", """
        senses:
          tick: {}
        reflexes:
          - {sense: tick, interval: 100ms}
        fleet:
          servers: [nats://127.0.0.1:9]
          publish: {senses: [tick]}
        engine:
          otel: {endpoint: "http://127.0.0.1:9"}
    """, sense)
    assert {"nats", "opentelemetry"} <= _loaded_by_engine(with_fleet)  # the check sees them when configured
