"""Typer's coercion of option values, without pydantic for the plain ones.

typer (0.29) turns every parameter of the command being run through a pydantic
`TypeAdapter`, built when the parameter is processed, its value given or not:
importing pydantic and building one adapter per option cost a command that only
takes `--home` 2.4× `nerve --help`. Nerve's options are mostly plain: strings,
paths, flags, whole numbers, choices. For those the value a command line gives
is taken here the way typer's adapter takes it (the same functions typer uses
for choices and paths), and anything else — a value of another type, a range,
a parser, a list, a choice that does not match — goes to typer's own adapter,
built then, so every message and conversion stays typer's.

It hooks one method of typer's parameter class (`_TyperParameter.get_runtime_param`),
so typer is pinned to the range this was written against (pyproject.toml), and
`tests/test_cli_fastparams.py` fails when the hook stops applying.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

INSTALLED = False  # whether the hook is in place (the test asks)
_FULL = object()  # "not a plain value: typer's adapter decides"


def install() -> bool:
    """Put the hook in place (once); False when this typer has not the parts it hooks (the full path stays)."""
    global INSTALLED
    if INSTALLED:
        return True
    try:
        from typer import core
        from typer._coercion import RuntimeParam, build_runtime_param
        from typer._param_types import choice_coercion_annotation, coerce_cli_choice, coerce_cli_path
    except ImportError:
        return False
    parameter = getattr(core, "_TyperParameter", None)
    if parameter is None or not callable(getattr(parameter, "get_runtime_param", None)):
        return False

    @dataclass(frozen=True)
    class PlainParam(RuntimeParam):  # typer's own base, as its params use it
        descriptor: Any = None
        full: list[Any] = field(default_factory=list)  # typer's adapter, built the first time it is needed

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            found = _plain(self.annotation, self.parameter_info, value, param, ctx)
            if found is not _FULL:
                return found
            if not self.full:
                self.full.append(build_runtime_param(self.descriptor))
            return self.full[0]._coerce_value(value, param=param, ctx=ctx)

    def _plain(annotation: Any, info: Any, value: Any, param: Any, ctx: Any) -> Any:
        if info.parser is not None:
            return _FULL
        if annotation is str:
            return value if isinstance(value, str) else _FULL
        if annotation is bool:
            return value if isinstance(value, bool) else _FULL
        if annotation is int:
            number = int(value) if isinstance(value, str) and value.isascii() and value.isdigit() else value
            if type(number) is not int:
                return _FULL
            inside = (info.min is None or number >= info.min) and (info.max is None or number <= info.max)
            return number if inside else _FULL  # (out of range: typer's adapter clamps or says why)
        if isinstance(annotation, type) and issubclass(annotation, Path) and info.path_type is None:
            if isinstance(value, (str, Path)):  # as typer's path adapter, with the value already a Path
                return coerce_cli_path(annotation(value), info, path_type=annotation, param=param, ctx=ctx)
            return _FULL
        choices = choice_coercion_annotation(annotation, info)
        if choices is not None and isinstance(value, str):
            try:
                return coerce_cli_choice(value, choices=choices[0], case_sensitive=choices[1], ctx=ctx)
            except ValueError:
                return _FULL  # typer's adapter says why, in its words
        return _FULL

    def get_runtime_param(self: Any) -> Any:
        if self._runtime_param is None:
            descriptor = self.type_descriptor
            if descriptor.file_annotation is None:
                self._runtime_param = PlainParam(descriptor.parameter_info, descriptor.annotation, descriptor)
            else:
                self._runtime_param = build_runtime_param(descriptor)
        return self._runtime_param

    parameter.get_runtime_param = get_runtime_param
    INSTALLED = True
    return True
