"""Import user files (senses, workflows) as modules of synthetic packages.

User folder names may contain '-' and '.', which are not identifiers; modules
are registered in `sys.modules` programmatically, which Python allows, so
relative imports between a user's own files work. Only worker processes and
development-time commands import user code: the kernel never does.

User code is always compiled from its source, never from a `__pycache__` file:
a .pyc is trusted when the source's modification time, in whole seconds, and
its size match, so an edit saved within the second of the last import that
keeps the size (`str` → `int` in schema.py) would silently run the old code. A
process that imports user code writes no bytecode either, so a helper module
the user's files import cannot be met stale.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path


class FreshSourceLoader(importlib.machinery.SourceFileLoader):
    """Compiles the file each time it is imported (see the module docstring)."""

    def get_code(self, fullname: str) -> types.CodeType:
        return self.source_to_code(self.get_data(self.path), self.path)


def ensure_package(name: str, path: Path | None) -> types.ModuleType:
    """A package module `name` whose submodules are looked up in `path`."""
    sys.dont_write_bytecode = True  # this process imports user code: no .pyc of it to be trusted later
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        module.__path__ = [str(path)] if path else []
        module.__package__ = name
        sys.modules[name] = module
    return module


def import_file(qualified: str, path: Path) -> types.ModuleType:
    """Execute `path` as module `qualified` (replacing any earlier one); the user's exceptions propagate."""
    sys.modules.pop(qualified, None)
    spec = importlib.util.spec_from_file_location(qualified, path, loader=FreshSourceLoader(qualified, str(path)))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(qualified, None)
        raise
    return module


def compute_takes_trigger(sense_py: Path) -> bool:
    """Whether sense.py's `compute` names a third parameter (receives `trigger`), read from its source
    without running it: for a sense no worker has loaded (a disabled one, an engine not running)."""
    try:
        tree = ast.parse(Path(sense_py).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "compute":
            args = node.args
            return args.vararg is None and len(args.posonlyargs) + len(args.args) >= 3
    return False
