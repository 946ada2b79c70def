"""The Click groups behind `nerve` and its sub-commands: whole summaries in --help, errors translated once."""

from __future__ import annotations

import errno
import sys
from typing import Any, Sequence

import typer
from typer.core import TyperArgument, TyperGroup

SUMMARY_LIMIT = 1000  # Click cuts a summary to the terminal width with "..."; we let the help formatter wrap it


def _usage_pieces(self: TyperArgument, ctx: object) -> list[str]:
    """An argument in a usage line as Unix tools and Click write it — `NAME`, `[PAYLOAD]`, `[ID]...` — where
    typer 0.29 writes `{name}`, which reads as a placeholder nobody filled in (tests/test_cli_help.py holds it)."""
    name = self.metavar or (self.name or "").upper()
    name = name if self.required else f"[{name}]"
    return [name + ("..." if self.nargs != 1 else "")]


_display_type = TyperArgument.display_type


def _display_type_of_argument(self: TyperArgument, ctx: typer.Context) -> str:
    """A repeated argument's type as its element's (`ID... <int>`, not `<list[int]>`): the `...` says it repeats."""
    label = _display_type(self, ctx)
    return f"<{label[6:-2]}>" if label.startswith("<list[") and label.endswith("]>") else label


TyperArgument.get_usage_pieces = _usage_pieces  # type: ignore[method-assign]
TyperArgument.display_type = _display_type_of_argument  # type: ignore[method-assign, assignment]


class HelpGroup(TyperGroup):
    """A group whose command list shows each command's first sentence whole."""

    def list_commands(self, ctx) -> list[str]:
        return list(self.commands)  # names only (Typer's own asks for every command: a lazy root would build all)

    def format_commands(self, ctx, formatter) -> None:
        rows = []
        summary = getattr(self.commands, "summary", None)  # the root's LazyCommands knows them unbuilt
        for name in self.list_commands(ctx):
            line = summary(name) if summary else None
            if line is not None:
                rows.append((name, line))
                continue
            cmd = self.get_command(ctx, name)
            if cmd is not None and not cmd.hidden:
                rows.append((name, cmd.get_short_help_str(SUMMARY_LIMIT)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def wants_json(args: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (`--json`, `--format json`): then errors are JSON too."""
    args = list(args)
    if "--json" in args or "--format=json" in args:
        return True
    return any(a == "--format" and b.lower() == "json" for a, b in zip(args, args[1:]))


REFUSED_WRITES = {errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EDQUOT}


class NerveGroup(HelpGroup):
    """The root: turns a NerveError (or, with --json, a usage error) anywhere below into its output and exit code.

    So is a write the filesystem refused (read-only, full, not ours): the
    user's to fix, named by its file, never a traceback. Without --json: one
    red line on stderr (and each problem of an invalid nerve.yaml). With
    --json: the error document on stdout. Same exit codes.
    """

    _argv: list[str] = []

    def main(self, args: Sequence[str] | None = None, *a: Any, **kw: Any) -> Any:
        self._argv = list(sys.argv[1:] if args is None else args)
        return super().main(args, *a, **kw)

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        """Parsing prints --help and --version: a reader gone by then is met here (Click would exit 1)."""
        from nerve_cli.cli.pipes import closed_stdout_exits

        with closed_stdout_exits():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        from nerve_cli.cli.pipes import closed_stdout_exits

        with closed_stdout_exits():  # also when an error's own message meets the closed pipe
            return self._invoke(ctx)

    def _invoke(self, ctx):
        from nerve_cli.errors import NerveError

        try:
            return super().invoke(ctx)
        except NerveError as exc:
            self._fail(exc)
        except OSError as exc:
            if exc.errno not in REFUSED_WRITES or not exc.filename:
                raise
            from nerve_cli.store.sqlitefile import storage_error

            self._fail(storage_error(exc.filename, exc))  # a read-only or full disk: the user's to fix
        except typer.BadParameter as exc:  # what a command body raises for a bad value it parsed itself
            self._usage(exc)
            raise
        except Exception as exc:
            from typer._click.exceptions import ClickException, UsageError

            if isinstance(exc, UsageError):
                self._usage(exc)
            elif wants_json(self._argv) and not isinstance(exc, (typer.Exit, typer.Abort, ClickException)):
                from nerve_cli.cli import output
                from nerve_cli.contract.errors import internal

                output.print_json(internal(exc))  # a script still reads a document; the traceback goes to stderr
            raise

    def _fail(self, exc: Any) -> None:
        if wants_json(self._argv):
            from nerve_cli.cli import output
            from nerve_cli.contract.errors import from_nerve_error

            output.print_json(from_nerve_error(exc))
        else:
            _print_error(exc)
        raise typer.Exit(exc.exit_code) from None

    def _usage(self, exc: Any) -> None:
        if wants_json(self._argv):
            from nerve_cli.cli import output
            from nerve_cli.contract.errors import from_usage_error

            output.print_json(from_usage_error(exc))
            raise typer.Exit(exc.exit_code) from None


def _print_error(exc: Any) -> None:
    from nerve_cli.cli import output

    output.error(str(exc))
    for problem in getattr(exc, "problems", None) or []:
        output.err_console().print(f"  {problem}", highlight=False, markup=False)
