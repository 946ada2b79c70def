"""`nerve agent install claude|opencode|codex NAME`: the harness's own configuration, merged with what is there.

Each harness keeps its settings in its own files; this writes our entries into
them and keeps every other entry as it was (keys, order, other hooks, other
servers, permissions), so running it again changes nothing:

- **claude** (Claude Code): in the project's `.claude/settings.json`, a
  `SessionStart` and a `Stop` hook running `nerve agent wait NAME` as an
  `async` + `asyncRewake` command (an async hook that exits 2 wakes the
  session with its stderr; the Stop hook's call acknowledges the turn that
  just ended and waits for the next events); in `.mcp.json` the `nerve` MCP
  server (`nerve mcp --home HOME`).
- **opencode**: the same hooks in `.opencode/hooks.json` (OpenCode's
  Claude-compatible hooks file, with `async` and `asyncRewake`), and the MCP
  server under `mcp` in `opencode.json` (`{"type": "local", "command": [...]}`).
- **codex**: the MCP server as `[mcp_servers.nerve]` in `$CODEX_HOME/config.toml`
  (default `~/.codex`). Codex has no wake hook: its turns are started by
  Nerve through `codex app-server` (`agents.NAME.deliver.codex`), which the
  notes say how to set.

A file that is not valid JSON (or TOML) is refused with its path, never
rewritten. Writes go to a temporary file and are moved into place.
"""

from __future__ import annotations

import copy
import json
import os
import shlex
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nerve_cli.errors import ErrorType, NerveError

HARNESSES = ("claude", "opencode", "codex")
HOOK_EVENTS = ("SessionStart", "Stop")
HOOK_TIMEOUT_S = 86_400  # the hook's own timeout (a day); the wait gives up a little before it
WAIT_TIMEOUT = "23h"
SERVER = "nerve"


class InstallError(NerveError):
    type = ErrorType.USAGE


@dataclass(frozen=True)
class Written:
    path: Path
    action: str  # created | updated | unchanged
    content: str

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "action": self.action, "content": self.content}


def nerve_command() -> list[str]:
    """How a harness runs this Nerve: the `nerve` script beside this Python, else `python -m nerve_cli`."""
    script = Path(sys.executable).parent / "nerve"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "nerve_cli"]


def wait_command(home: Path, agent: str) -> str:
    return shlex.join([*nerve_command(), "agent", "wait", agent, "--home", str(home), "--timeout", WAIT_TIMEOUT])


def mcp_command(home: Path) -> list[str]:
    return [*nerve_command(), "mcp", "--home", str(home)]


def plan(harness: str, agent: str, home: Path, project: Path, codex_home: Path | None = None) -> tuple[list[Written], list[str]]:
    """What installing would write (nothing is written): the files with their new content, and notes."""
    home, project = Path(home).resolve(), Path(project).resolve()
    if harness == "claude":
        hooks = _hooked(_read_json(project / ".claude" / "settings.json"), wait_command(home, agent))
        servers = _served(_read_json(project / ".mcp.json"), "mcpServers",
                          {"command": mcp_command(home)[0], "args": mcp_command(home)[1:]})
        files = [_json_file(project / ".claude" / "settings.json", *hooks), _json_file(project / ".mcp.json", *servers)]
        return files, [f"Claude Code starts `nerve agent wait {agent}` at each session start and after each turn; "
                       "restart open sessions to load the hooks"]
    if harness == "opencode":
        hooks = _hooked(_read_json(project / ".opencode" / "hooks.json"), wait_command(home, agent))
        servers = _served(_read_json(project / "opencode.json"), "mcp",
                          {"type": "local", "command": mcp_command(home), "enabled": True})
        return [_json_file(project / ".opencode" / "hooks.json", *hooks), _json_file(project / "opencode.json", *servers)], \
            [f"OpenCode runs `nerve agent wait {agent}` as an asyncRewake hook (its Claude-compatible hooks file)"]
    if harness == "codex":
        root = codex_home or Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")
        return [_toml_server(root / "config.toml", mcp_command(home))], [
            f"Codex has no wake hook: have Nerve start its turns. Run `codex app-server --listen "
            f"unix://{home}/data/codex.sock`, then set `agents.{agent}.deliver.codex: {{endpoint: "
            f"unix://{home}/data/codex.sock, thread: THREAD_ID}}` in nerve.yaml (the thread your session works in)"]
    raise InstallError(f"no harness {harness!r}: nerve agent install takes {', '.join(HARNESSES)}")


def write(files: list[Written]) -> None:
    for item in files:
        if item.action == "unchanged":
            continue
        item.path.parent.mkdir(parents=True, exist_ok=True)
        temp = item.path.with_name(f".{item.path.name}.nerve-tmp")
        temp.write_text(item.content, encoding="utf-8")
        os.replace(temp, item.path)


# -- JSON harness files ---------------------------------------------------------------------------------------

def _read_json(path: Path) -> "Read":
    """(path, its object or None when absent, its text)."""
    if not path.exists():
        return path, None, None
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise InstallError(f"{path} is not valid JSON ({exc}); fix it (nothing was written)") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path} holds a JSON {type(data).__name__}, not an object; fix it (nothing was written)")
    return path, data, text


Read = tuple[Path, "dict[str, Any] | None", "str | None"]  # a file: its path, its object (None: absent), its text
Merged = tuple["dict[str, Any] | None", dict[str, Any], "str | None"]  # the old object, the new one, the old text


def _hooked(read: Read, command: str) -> Merged:
    path, old, text = read
    new = copy.deepcopy(old) if old is not None else {}
    hooks = new.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InstallError(f"{path}: `hooks` is not an object; fix it (nothing was written)")
    entry = {"type": "command", "command": command, "async": True, "asyncRewake": True, "timeout": HOOK_TIMEOUT_S}
    for event in HOOK_EVENTS:
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise InstallError(f"{path}: `hooks.{event}` is not a list; fix it (nothing was written)")
        present = any(isinstance(g, dict) and isinstance(g.get("hooks"), list)
                      and any(isinstance(h, dict) and h.get("command") == command for h in g["hooks"]) for g in groups)
        if not present:
            groups.append({"hooks": [dict(entry)]})
    return old, new, text


def _served(read: Read, section: str, server: dict[str, Any]) -> Merged:
    path, old, text = read
    new = copy.deepcopy(old) if old is not None else {}
    servers = new.setdefault(section, {})
    if not isinstance(servers, dict):
        raise InstallError(f"{path}: `{section}` is not an object; fix it (nothing was written)")
    if servers.get(SERVER) != server:
        servers[SERVER] = server
    return old, new, text


def _json_file(path: Path, old: dict[str, Any] | None, new: dict[str, Any], text: str | None) -> Written:
    if old is not None and old == new and text is not None:
        return Written(path, "unchanged", text)
    return Written(path, "created" if old is None else "updated", json.dumps(new, indent=2, ensure_ascii=False) + "\n")


# -- Codex's TOML ---------------------------------------------------------------------------------------------

def _toml_server(path: Path, command: list[str]) -> Written:
    text = path.read_text(encoding="utf-8") if path.exists() else None
    try:
        data = tomllib.loads(text) if text else {}
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(f"{path} is not valid TOML ({exc}); fix it (nothing was written)") from None
    wanted = {"command": command[0], "args": command[1:]}
    have = data.get("mcp_servers", {}).get(SERVER) if isinstance(data.get("mcp_servers"), dict) else None
    if have is not None:
        if {k: have.get(k) for k in wanted} == wanted:
            return Written(path, "unchanged", text or "")
        raise InstallError(f"{path} already has [mcp_servers.{SERVER}] with another command; remove that table and "
                           "run this again (nothing was written)")
    block = (f"\n[mcp_servers.{SERVER}]\ncommand = {json.dumps(command[0])}\n"
             f"args = [{', '.join(json.dumps(a) for a in command[1:])}]\n")
    content = (text.rstrip("\n") + "\n" if text else "") + block
    return Written(path, "created" if text is None else "updated", content)
