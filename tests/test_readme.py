"""The docs stay the reference: every command, every --json document and every MCP tool is in its page,
whole; README.md stays short, and every link in it resolves."""

from __future__ import annotations

import re
from pathlib import Path

import typer

from nerve_cli.cli.app import app
from nerve_cli.contract.schema import KINDS

ROOT = Path(__file__).resolve().parents[1]
README_PATH = ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")
DOCS = ROOT / "docs"
COMMANDS = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
JSON_PAGE = (DOCS / "reference" / "json.md").read_text(encoding="utf-8")
MCP_PAGE = (DOCS / "guides" / "mcp.md").read_text(encoding="utf-8")


def _reference_rows() -> list[str]:
    """The first cell of each row of the command reference, as one line of words: `nerve thread approve|reject
    run-7 ...` (a cell written `` `a` / `b` `` reads `a/b`: alternatives, as `|`)."""
    rows = []
    for line in COMMANDS.splitlines():
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
    for path in [README_PATH, *sorted(DOCS.rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        markers = [line for line in text.splitlines() if re.match(r"^(<{7}|={7}|>{7})( |$)", line)]
        assert not markers, (path, markers)


def test_every_command_has_a_row_in_the_command_reference() -> None:
    rows = _reference_rows()
    commands = [path for path, _ in _leaves(typer.main.get_command(app), "nerve")]
    assert len(commands) > 25
    missing = [c for c in commands if not any(_names(row, c.split()) for row in rows)]
    assert not missing, f"commands with no row in docs/reference/commands.md: {missing}"


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
    assert not missing, f"options missing from their command's row in docs/reference/commands.md: {missing}"


def test_every_json_document_is_described() -> None:
    table = {m.group(1) for m in re.finditer(r"^\| `([a-z-]+)` \| ", JSON_PAGE, re.M)}
    missing = sorted(set(KINDS) - table)
    assert not missing, f"--json documents missing from docs/reference/json.md's table: {missing}"


def test_every_mcp_tool_is_described() -> None:
    source = (ROOT / "nerve_cli" / "mcp" / "server.py").read_text(encoding="utf-8")
    tools = set(re.findall(r"^    @app\.tool\([^\n]*\)\n    def ([a-z_]+)\(", source, re.M))
    rows = re.findall(r"^\| `([a-z_]+)`(?: / `([a-z_]+)`)? \|", MCP_PAGE, re.M)
    documented = {name for pair in rows for name in pair if name}
    assert len(tools) >= 12
    assert not tools - documented, f"nerve mcp tools missing from docs/guides/mcp.md's table: {tools - documented}"


def test_the_readme_is_short() -> None:
    lines = README.splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines: move the new text into its page under docs/"


def _anchors(markdown: str) -> set[str]:
    """The ids the headings of a page get, as GitHub and MkDocs' toc both make them."""
    ids, fence = set(), False
    for line in markdown.splitlines():
        if line.startswith("```"):
            fence = not fence
        match = None if fence else re.match(r"^#{1,6} (.+)", line)
        if match:
            text = re.sub(r"[`*]", "", match.group(1)).strip().lower()
            ids.add(re.sub(r"\s+", "-", re.sub(r"[^\w\- ]", "", text)))
    return ids


def test_every_readme_link_resolves() -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    assert len(links) > 20
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        target, _, anchor = link.partition("#")
        path = (README_PATH.parent / target).resolve() if target else README_PATH
        assert path.exists(), f"README links to {link}: no such file"
        if anchor:
            assert anchor in _anchors(path.read_text(encoding="utf-8")), f"README links to {link}: no such heading"
