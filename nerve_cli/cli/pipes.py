"""A reader that leaves early (`nerve logs | head -1`): every command stops writing and exits quietly.

Exit status 141 (128 + SIGPIPE), what the shell reports for `git log | head -1`
or `cat big.log | head -1`: not a failure of the command (1 would read as one),
not a success either (the output was cut), and `set -o pipefail` scripts treat
it as they treat every other tool's. Click and Rich would each exit 1 on their
own, and the interpreter's last flush would print "Exception ignored ...
BrokenPipeError" and exit 120: the CLI meets the closed pipe first, in one place
(NerveGroup, for parsing and the command; `main`, for the last flush).

SIGPIPE itself stays ignored (Python's default): a command also writes to its
own workers' pipes, where a closed pipe is an error to report, not a reason to
die. So a closed stdout is told apart from those by asking the descriptor.
"""

from __future__ import annotations

import os
import select
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

PIPE_CLOSED = 141  # 128 + SIGPIPE


def stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a test runner, or closed: not a pipe of ours
        return False
    if not hasattr(select, "poll"):
        return True  # no poll() (Windows): trust the BrokenPipeError, as Click does
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def silence_stdout() -> None:
    """Point stdout at /dev/null: what is still buffered, and the interpreter's last flush, go nowhere quietly."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, sys.stdout.fileno())
        finally:
            os.close(devnull)
    except (AttributeError, OSError, ValueError):
        pass


def reader_left() -> bool:
    """Called on a BrokenPipeError: True (stdout silenced; exit with PIPE_CLOSED) if it was stdout's reader
    that left, False if it came from another pipe (an error to report as any other)."""
    if not stdout_closed():
        return False
    silence_stdout()
    return True


@contextmanager
def closed_stdout_exits() -> Iterator[None]:
    """Inside Click's main (parsing, the command, its error message): a closed stdout ends the command with
    typer.Exit(141) before Click's own rule (exit 1) sees the BrokenPipeError."""
    try:
        yield
    except BrokenPipeError:
        if not reader_left():
            raise
        raise typer.Exit(PIPE_CLOSED) from None


@contextmanager
def quiet_when_stdout_closes() -> Iterator[None]:
    """Around Click's main (`nerve_cli.cli.app.main`): what is still buffered, flushed last, or anything
    Click does before parsing (shell completion) meets a closed stdout here: exit 141 quietly."""
    try:
        try:
            yield
        finally:
            sys.stdout.flush()  # meet the closed pipe here rather than in the interpreter's exit
    except BrokenPipeError:
        if not reader_left():
            raise
        raise SystemExit(PIPE_CLOSED) from None
