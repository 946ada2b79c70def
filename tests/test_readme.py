"""README.md stays the reference: every command, every --json document and every MCP tool is in it, whole."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from nerve_cli.cli.app import app
from nerve_cli.contract.schema import KINDS

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _reference_rows() -> list[str]:
    """The first cell of each row of the command reference, as one line of words: `nerve thread approve|reject
    run-7 ...` (a cell written `` `a` / `b` `` reads `a/b`: alternatives, as `|`)."""
    rows = []
    for line in README.splitlines():
        if line.startswith("| `nerve "):
            cell = re.split(r"(?<!\\) \| ", line[2:], maxsplit=1)[0]
            rows.append(cell.replace("\\|", "|").replace("` / `", "/").replace("`", ""))
    return rows


def _names(row: str, words: list[str]) -> bool:
    """Whether a reference row is about the command `words` (`approve|reject`, `uninstall/status`: alternatives)."""
    cells = row.split()
    if len(cells) < len(words) or cells[: len(words) - 1] != words[:-1]:
        return False
    return words[-1] in re.split(r"[|/]", cells[len(words) - 1])


def _leaves(group, prefix: str):
    for name, command in sorted(group.commands.items()):
        if not command.hidden:
            path = f"{prefix} {name}"
            yield from _leaves(command, path) if getattr(command, "commands", None) else [(path, command)]


def test_no_merge_was_left_half_done() -> None:
    markers = [line for line in README.splitlines() if re.match(r"^(<{7}|={7}|>{7})( |$)", line)]
    assert not markers, markers


def test_every_command_has_a_row_in_the_command_reference() -> None:
    rows = _reference_rows()
    commands = [path for path, _ in _leaves(typer.main.get_command(app), "nerve")]
    assert len(commands) > 25
    missing = [c for c in commands if not any(_names(row, c.split()) for row in rows)]
    assert not missing, f"commands with no row in README's command reference: {missing}"


def test_every_option_is_in_its_commands_row() -> None:
    rows = _reference_rows()
    missing = []
    for path, command in _leaves(typer.main.get_command(app), "nerve"):
        words = path.split()
        text = " ".join(row for row in rows if _names(row, words)).replace("[", " ").replace("]", " ")
        tokens = set(re.split(r"[\s|/]+", text))
        for param in command.params:
            opts = [o for o in (*param.opts, *param.secondary_opts) if o.startswith("-")]
            if opts and not set(opts) & {"--home", "--help"} and not set(opts) & tokens:
                missing.append(f"{path} {opts[0]}")
    assert not missing, f"options missing from their command's row in README's command reference: {missing}"


def test_every_json_document_is_described() -> None:
    table = {m.group(1) for m in re.finditer(r"^\| `([a-z-]+)` \| ", README, re.M)}
    missing = sorted(set(KINDS) - table)
    assert not missing, f"--json documents missing from README's JSON output table: {missing}"


def test_every_mcp_tool_is_described() -> None:
    source = (Path(__file__).resolve().parents[1] / "nerve_cli" / "mcp" / "server.py").read_text(encoding="utf-8")
    tools = set(re.findall(r"^    @app\.tool\([^\n]*\)\n    def ([a-z_]+)\(", source, re.M))
    rows = re.findall(r"^\| `([a-z_]+)`(?: / `([a-z_]+)`)? \|", README, re.M)
    documented = {name for pair in rows for name in pair if name}
    assert len(tools) >= 12
    assert not tools - documented, f"nerve mcp tools missing from README's Agents table: {tools - documented}"
