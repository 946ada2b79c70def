"""Import a sense's own files (schema.py, sense.py) as a package, so `from .schema import X` works.

Modules are registered as `_nerve_senses.<name>.<part>` (see `nerve_cli.usercode`).

Any sense's modules can also be imported from any other, in every process that
imports sense code (whatever group it runs in): `from ..cpu_usage.schema import
Sample` in `senses/active-tasks/sense.py` names `senses/cpu-usage/schema.py`.
A sense name that is not a Python identifier is written with `_` for each `-`
and `.`; the import finds the one folder of that spelling (an exact match wins;
two folders spelled alike are refused, naming both). Importing a peer's schema
gives its `@table` classes, to read the peer through its `peers` handle with
types (`peers["cpu-usage"].rows(Sample)`); the handle itself stays read-only.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from pathlib import Path

from nerve_cli.usercode import ensure_package, import_file

ROOT_PACKAGE = "_nerve_senses"
_ROOT_ATTR = "__nerve_senses_root__"


def import_sense_module(sense_dir: Path, name: str, part: str, *, fresh: bool = False) -> types.ModuleType:
    """Import `<sense_dir>/<part>.py` as `_nerve_senses.<name>.<part>`.

    Exceptions from the user's file (SyntaxError, ImportError, ...) propagate unchanged.
    """
    root = ensure_package(ROOT_PACKAGE, None)
    setattr(root, _ROOT_ATTR, str(Path(sense_dir).parent))
    _install_finder()
    package = f"{ROOT_PACKAGE}.{name}"
    ensure_package(package, sense_dir)
    qualified = f"{package}.{part}"
    if not fresh and qualified in sys.modules:
        return sys.modules[qualified]
    return import_file(qualified, sense_dir / f"{part}.py")


def spelled(name: str) -> str:
    """How a sense's package is written in an import statement: `cpu-usage` → `cpu_usage`."""
    return name.replace("-", "_").replace(".", "_")


class _OtherSenses(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds `_nerve_senses.<spelling>[.<part>]` for a sense this process has not loaded itself."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        parts = fullname.split(".")
        if parts[0] != ROOT_PACKAGE or len(parts) not in (2, 3):
            return None
        if _root() is None:
            return None
        folder = _folder(parts[1])
        if folder is None:
            raise _no_such_sense(parts[1], fullname)
        if len(parts) == 3 and not (folder / f"{parts[2]}.py").is_file():
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=len(parts) == 2)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        parts = spec.name.split(".")
        folder = _folder(parts[1])
        assert folder is not None  # found a moment ago by find_spec
        if len(parts) == 2:  # the sense's package: the one its own files are registered in
            return ensure_package(f"{ROOT_PACKAGE}.{folder.name}", folder)
        return import_sense_module(folder, folder.name, parts[2])

    def exec_module(self, module: types.ModuleType) -> None:
        """Nothing: create_module gave a module already executed."""


def _folder(spelling: str) -> Path | None:
    """The sense folder an import spelling names; ImportError when two folders are spelled alike."""
    root = _root()
    if root is None:
        return None
    exact = root / spelling
    if (exact / "sense.py").is_file():
        return exact
    alike = sorted(p for p in root.iterdir() if spelled(p.name) == spelling and (p / "sense.py").is_file())
    if len(alike) > 1:
        raise ImportError(f"`{spelling}` could name the senses {' and '.join(p.name for p in alike)}; "
                          f"import one with importlib.import_module('{ROOT_PACKAGE}.<name>.schema') instead")
    return alike[0] if alike else None


def _root() -> Path | None:
    """The senses/ folder of the instance whose senses this process imports."""
    root = getattr(sys.modules.get(ROOT_PACKAGE), _ROOT_ATTR, None)
    return Path(root) if root is not None and Path(root).is_dir() else None


def _no_such_sense(spelling: str, fullname: str) -> ModuleNotFoundError:
    root = _root()
    there = sorted(spelled(p.name) for p in root.iterdir() if (p / "sense.py").is_file()) if root else []
    return ModuleNotFoundError(f"no sense folder senses/{spelling} (a sense's name is imported with _ for "
                               f"each - and .); the senses here import as: {', '.join(there) or 'none'}",
                               name=fullname)


_FINDER = _OtherSenses()


def _install_finder() -> None:
    # first: the path finder would execute a sense's file a second time under the other spelling
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
