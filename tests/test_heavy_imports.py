"""`llm` and `mcp` are imported only where they are used: llm-backed workflow workers and the `nerve mcp` process.

`nerve --help`, the kernel, the sense workers and every other module stay free of them
(llm costs ≈ 0.4 s with its plugins, mcp's server ≈ 1 s).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "nerve_cli"
HEAVY = ("llm", "mcp")
# the only modules allowed to import them
ALLOWED = {"nerve_cli.roles.llm", "nerve_cli.roles.tools", "nerve_cli.roles.llm_log"}  # llm_log: in its functions
ALLOWED_PREFIX = "nerve_cli.mcp."


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _allowed(module: str) -> bool:
    return module in ALLOWED or module.startswith(ALLOWED_PREFIX)


def _heavy_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        found.update(n for n in names if n.split(".")[0] in HEAVY)
    return found


def _modules() -> list[str]:
    return sorted(_module(p) for p in ROOT.rglob("*.py") if "templates" not in p.parts)


def test_only_the_allowed_modules_import_llm_or_mcp() -> None:
    offenders = {_module(p): _heavy_imports(p) for p in ROOT.rglob("*.py") if "templates" not in p.parts}
    offenders = {m: i for m, i in offenders.items() if i and not _allowed(m)}
    assert not offenders, f"llm/mcp imported outside the workers and `nerve mcp` that need them: {offenders}"
    assert {"llm", "llm.cli"} <= _heavy_imports(ROOT / "roles" / "llm_log.py")  # it sees function-level imports


def test_importing_the_kernel_the_cli_and_every_other_module_loads_neither() -> None:
    modules = [m for m in _modules() if not _allowed(m) and m != "nerve_cli.__main__"]
    code = ("import importlib, sys\n"
            f"for name in {modules!r}:\n    importlib.import_module(name)\n"
            "from nerve_cli.sdk import llm_role\n"  # the SDK name alone does not import llm
            "llm_role(model='echo')\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    assert len(modules) > 100


def test_nerve_help_loads_neither() -> None:
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "nerve_cli", "--help"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert "typer" in loaded  # importtime lines were read
    assert not loaded & set(HEAVY)


def test_the_http_server_loads_only_with_webhooks() -> None:
    """uvicorn and starlette (≈ 0.1 s) are imported by the webhook server and the answer links it serves, itself
    imported only when webhooks are on, and by `nerve ui`'s own modules: the kernel without webhooks, and every
    other command, never loads them."""
    web = ("uvicorn", "starlette")
    users = {_module(p) for p in ROOT.rglob("*.py") if "templates" not in p.parts
             and {n.split(".")[0] for n in _all_imports(p)} & set(web)}
    assert {u for u in users if not u.startswith((ALLOWED_PREFIX, "nerve_cli.ui."))} == {
        "nerve_cli.kernel.ingress.webhooks", "nerve_cli.kernel.ingress.links"}
    code = ("import sys, nerve_cli.kernel.engine, nerve_cli.cli.run_cmd\n"
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {web!r}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _all_imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module or "")
    return found
