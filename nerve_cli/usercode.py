"""Import user files (senses, workflows) as modules of synthetic packages.

User folder names may contain '-' and '.', which are not identifiers; modules
are registered in `sys.modules` programmatically, which Python allows, so
relative imports between a user's own files work. Only worker processes and
development-time commands import user code: the kernel never does.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path


def ensure_package(name: str, path: Path | None) -> types.ModuleType:
    """A package module `name` whose submodules are looked up in `path`."""
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        module.__path__ = [str(path)] if path else []  # type: ignore[attr-defined]
        module.__package__ = name
        sys.modules[name] = module
    return module


def import_file(qualified: str, path: Path) -> types.ModuleType:
    """Execute `path` as module `qualified` (replacing any earlier one); the user's exceptions propagate."""
    sys.modules.pop(qualified, None)
    spec = importlib.util.spec_from_file_location(qualified, path)
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
