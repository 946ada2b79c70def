"""Import a sense's own files (schema.py, sense.py) as a package, so `from .schema import X` works.

Sense names may contain '-' and '.', which are not identifiers; modules are
registered under `_nerve_senses.<name>` programmatically, which Python allows.
Only worker processes and development-time commands call this: the kernel never does.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

ROOT_PACKAGE = "_nerve_senses"


def _ensure_package(name: str, path: Path | None) -> types.ModuleType:
    module = sys.modules.get(name)
    if module is None:
        module = types.ModuleType(name)
        module.__path__ = [str(path)] if path else []  # type: ignore[attr-defined]
        module.__package__ = name
        sys.modules[name] = module
    return module


def import_sense_module(sense_dir: Path, name: str, part: str, *, fresh: bool = False) -> types.ModuleType:
    """Import `<sense_dir>/<part>.py` as `_nerve_senses.<name>.<part>`.

    Exceptions from the user's file (SyntaxError, ImportError, ...) propagate unchanged.
    """
    _ensure_package(ROOT_PACKAGE, None)
    package = f"{ROOT_PACKAGE}.{name}"
    _ensure_package(package, sense_dir)
    qualified = f"{package}.{part}"
    if fresh:
        sys.modules.pop(qualified, None)
    elif qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, sense_dir / f"{part}.py")
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {sense_dir / (part + '.py')}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(qualified, None)
        raise
    return module
