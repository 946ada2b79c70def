"""Import a sense's own files (schema.py, sense.py) as a package, so `from .schema import X` works.

Modules are registered as `_nerve_senses.<name>.<part>` (see `nerve_cli.usercode`).
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

from nerve_cli.usercode import ensure_package, import_file

ROOT_PACKAGE = "_nerve_senses"


def import_sense_module(sense_dir: Path, name: str, part: str, *, fresh: bool = False) -> types.ModuleType:
    """Import `<sense_dir>/<part>.py` as `_nerve_senses.<name>.<part>`.

    Exceptions from the user's file (SyntaxError, ImportError, ...) propagate unchanged.
    """
    ensure_package(ROOT_PACKAGE, None)
    package = f"{ROOT_PACKAGE}.{name}"
    ensure_package(package, sense_dir)
    qualified = f"{package}.{part}"
    if not fresh and qualified in sys.modules:
        return sys.modules[qualified]
    return import_file(qualified, sense_dir / f"{part}.py")
