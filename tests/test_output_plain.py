"""Lines the CLI prints to a pipe without Rich are exactly what Rich would print there."""

from __future__ import annotations

import functools
import io
from typing import Iterator

import pytest
from rich.console import Console
from rich.text import Text

from nerve_cli.cli import output
from nerve_cli.config.problems import Problem

MESSAGES = [
    "engine pid 42 on /home/x, up 3m (since 2026-08-01T12:00:00.000Z)", "with [bold]markup[/bold] and :smile:",
    "tab\there", "trailing   ", "  leading", "émoji ✓ 日本語", "ctrl\x07bell", "cr\rx", "esc\x1b[31mred",
    "a" * 300, "back\\slash", "new\nline", "", "nul\x00byte", "form\x0cfeed", "vertical\x0btab", "back\x08space",
]


def rich_line(text: Text) -> str:
    """What the CLI's console (cli/output.py) prints for `text` into a pipe."""
    buf = io.StringIO()
    Console(file=buf, highlight=False, soft_wrap=True, width=output.PIPE_WIDTH).print(text)
    return buf.getvalue()


class Pipe:
    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def getvalue(self) -> str:
        return self.capsys.readouterr().out


@pytest.fixture()
def pipe(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipe]:
    """stdout captured by pytest: a pipe, no terminal."""
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)
    output.reset()
    yield Pipe(capsys)
    output.reset()


@pytest.mark.parametrize("message", MESSAGES)
def test_info_in_a_pipe_is_what_rich_prints(pipe: Pipe, message: str) -> None:
    output.info(message, style="bold")
    assert pipe.getvalue() == rich_line(Text(message, style="bold"))


@pytest.mark.parametrize("message", MESSAGES)
def test_a_problem_in_a_pipe_is_what_rich_prints(pipe: Pipe, message: str) -> None:
    item = Problem("senses.x.throttle", message, "error", 5)
    output.problem(item)
    expected = Text(f"{item.where()}: ") + Text("error") + Text(": ") + Text("senses.x.throttle: ") + Text(message)
    assert pipe.getvalue() == rich_line(expected)


def test_plain_lines_need_no_rich(pipe: Pipe, monkeypatch: pytest.MonkeyPatch) -> None:
    @functools.lru_cache  # output.reset() clears it, as it clears the real one
    def no_console() -> None:
        raise AssertionError("a plain line went through Rich")

    monkeypatch.setattr(output, "console", no_console)
    output.info("a plain line")
    output.problem(Problem("", "a problem", "warning", None))
    assert pipe.getvalue() == "a plain line\nnerve.yaml: warning: a problem\n"


def test_forced_colour_goes_through_rich(pipe: Pipe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    output.info("coloured", style="bold")
    assert "\x1b[" in pipe.getvalue()
