"""Plain option values skip pydantic (cli/fastparams.py); this fails if the hook stops applying (a typer
upgrade that moved what it hooks), and checks that what is not plain still gets typer's own answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer._adapters as adapters
from enginekit import write_instance
from typer.testing import CliRunner

from nerve_cli.cli import fastparams
from nerve_cli.cli.app import app

pytestmark = pytest.mark.fast


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The annotations typer built a pydantic adapter for, while the test ran."""
    found: list[Any] = []
    real = adapters.try_build_adapter

    def spy(annotation: Any, parameter_info: Any) -> Any:
        found.append(annotation)
        return real(annotation, parameter_info)

    monkeypatch.setattr(adapters, "try_build_adapter", spy)
    return found


def run(*args: str) -> Any:
    return CliRunner().invoke(app, list(args), env={"NO_COLOR": "1", "COLUMNS": "120"})


def test_plain_options_of_the_common_commands_build_no_adapter(home: Path, built: list[Any]) -> None:
    write_instance(home, "senses:\n  s: {}\nreflexes:\n  - {sense: s, interval: 1m}\n",
                   {"s": "def compute(db, peers):\n    return 1\n"})
    assert fastparams.INSTALLED
    for args in (("status", "--home", str(home), "--json"), ("status", "--home", str(home), "--format", "table"),
                 ("config", "check", "--home", str(home), "--fast"), ("sense", "list", "--home", str(home), "--json"),
                 ("logs", "--home", str(home), "--json", "--limit", "5")):
        result = run(*args)
        assert result.exit_code in (0, 3), (args, result.output)  # status: 3, the engine is not running
    assert built == []  # strings, paths, flags, whole numbers and choices: none through pydantic


def test_what_is_not_plain_gets_typers_own_answer(home: Path, built: list[Any]) -> None:
    write_instance(home, "senses: {}\n", {})
    wrong = run("status", "--home", str(home), "--format", "yaml")
    assert wrong.exit_code == 2 and "'yaml' is not one of" in wrong.output
    assert built  # typer's adapter said it
    below = run("logs", "--home", str(home), "--limit", "-1")
    assert below.exit_code == 2 and "greater than or equal to 0" in below.output  # out of range: typer's message
