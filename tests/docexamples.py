"""The fenced examples of README.md and docs/, run as a reader would run them (tests/test_docs_examples.py).

A block is executed unless its language is `text` (a picture, an output) or its title says it is
illustrative (```` ```sh title="illustrative: why it is not run" ````: Material shows the title above the block).
The blocks of one page run in order in one fresh instance (`nerve init`, unless the page's first command
is `nerve init` itself), with a fake `gh` (tests/fakegh.py: only real gh flags), a `notify-send` that
records its calls, llm's default model `echo` (llm-echo) and OpenAI's chat models answered by a fake endpoint
on loopback (tests/fakemodel.FakeChat, through OPENAI_BASE_URL):

- `python` whose first line names a file of the instance (`# senses/prs/sense.py`, `# workflows/ship.py`)
  is written there (an `(and an empty schema.py)` beside it too) and compiled; any other `python` is run
  as a module in a child process (its imports and top-level code);
- `yaml` whose first line is `# nerve.yaml` is merged into the instance's nerve.yaml; one that names a
  file (`# workflows/release.pipeline.yaml`) is written there; every `yaml` is validated as nerve.yaml
  would be (a fragment: the senses its reflexes and peers name are taken as declared);
- `json` is parsed, and an MCP client's config runs its `nerve` command with `--help`;
- `sh` runs one command at a time with bash in the instance's folder: each must exit 0, or the code its
  comment says (`# ... exit 5 ...`). `nerve run` starts in the background (stopped when the page ends)
  and the next command waits until it answers; `nerve top`, `nerve ui`, `nerve logs -f` and `nerve mcp`
  run for a few seconds. A read (`nerve thread show|list`, `nerve status`, `nerve sense show`, `nerve
  logs`) or an answer (`nerve thread approve|reject`) that fails is tried again until the engine has
  caught up, within a deadline that scales with the machine's load.

A page's webhook address (`127.0.0.1:8787`) is moved to a free port of its own, so pages run side by side.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fakemodel import FakeChat
from loadclock import scaled
from ruamel.yaml import YAML

_YAML = YAML(typ="safe", pure=True)  # YAML 1.2, as nerve.yaml is read: `on:` is a key, not true


def _load(text: str) -> Any:
    return _YAML.load(text)


def _dump(data: Any) -> str:
    import io

    out = io.StringIO()
    _YAML.dump(data, out)
    return out.getvalue()

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<info>[^`]*)$")
LANGS = {"sh", "python", "yaml", "json", "text"}
BACKGROUND = re.compile(r"^nerve run\b")
FOR_A_WHILE = re.compile(r"^(nerve (top|ui|mcp)\b|nerve logs\b.*(\s-f\b|\s--follow\b))")
RETRIED = re.compile(r"^nerve (thread (show|list|approve|reject)|status|sense show|logs|agent list)\b")
EXPECTED = re.compile(r"#.*\bexit (\d+)\b")


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    title: str
    body: str

    @property
    def executed(self) -> bool:
        return self.lang != "text" and not self.title.lower().startswith("illustrative")

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """Every fenced block of a page, with its language and title (`LANG title="..."`)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, i = [], 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match:
            indent, info = len(match.group("indent")), match.group("info").strip()
            j = i + 1
            while not re.match(r"^\s*```\s*$", lines[j]):
                j += 1
            lang = info.split()[0] if info else ""
            title = re.search(r'title="([^"]*)"', info)
            body = "\n".join(line[indent:] for line in lines[i + 1:j])
            found.append(Block(page, i + 1, lang, title.group(1) if title else "", body + "\n"))
            i = j
        i += 1
    return found


def commands(script: str) -> list[str]:
    """A shell block's commands: continuation lines joined, blank and comment-only lines left out."""
    out, pending = [], ""
    for line in script.splitlines():
        if pending:
            line = pending + " " + line.strip()
            pending = ""
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1]
            continue
        if line.strip() and not line.strip().startswith("#"):
            out.append(line.strip())
    return out


def _code_part(command: str) -> str:
    """The command without its trailing comment (a `#` after a space, outside quotes)."""
    quote = ""
    for i, char in enumerate(command):
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or command[i - 1].isspace()):
            return command[:i].rstrip()
    return command


def fragment_problems(text: str) -> list[str]:
    """A yaml block validated as nerve.yaml: the senses it names without declaring are taken as declared."""
    from nerve_cli.config.load import validate_text

    data = _load(text) or {}
    if not isinstance(data, dict):
        return [f"not a mapping: {data!r}"]
    senses = data.setdefault("senses", {}) or {}
    data["senses"] = senses
    named = [r.get("sense") for r in data.get("reflexes") or [] if isinstance(r, dict)]
    named += [p for s in senses.values() if isinstance(s, dict) for p in s.get("peers") or []]
    named += list(((data.get("fleet") or {}).get("publish") or {}).get("senses") or [])
    for name in named:
        if isinstance(name, str):
            senses.setdefault(name, {})
    _, problems = validate_text(_dump(data))
    return [f"{p.path}: {p.message}" for p in problems if p.severity == "error"]


def _merge(into: dict[str, Any], more: dict[str, Any]) -> None:
    for key, value in more.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        elif isinstance(value, list) and isinstance(into.get(key), list):
            into[key] = into[key] + value
        else:
            into[key] = value


class Session:
    """One page's blocks, run in order in one instance."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.bin = tmp / "bin"
        self.bin.mkdir()
        (tmp / "user").mkdir()
        self.gh_log = tmp / "gh.jsonl"
        self.notify_log = tmp / "notify-send.txt"
        self._tool("gh", f'exec {shlex.quote(sys.executable)} {shlex.quote(str(ROOT / "tests" / "fakegh.py"))} "$@"')
        self._tool("notify-send", f'printf "%s\\n" "$*" >> {shlex.quote(str(self.notify_log))}')
        llm_home = tmp / "llm"
        llm_home.mkdir()
        (llm_home / "default_model.txt").write_text("echo", encoding="utf-8")
        self.chat = FakeChat(pick=_merge_the_pr)
        self.env = {**os.environ, "NERVE_HOME": str(self.home), "HOME": str(tmp / "user"),
                    "PATH": f"{self.bin}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                    "FAKE_GH_LOG": str(self.gh_log), "LLM_USER_PATH": str(llm_home), "OPENAI_API_KEY": "sk-docs",
                    "OPENAI_BASE_URL": self.chat.url, "COLUMNS": "160", "NERVE_WARM_WORKERS": "0"}
        self.engine: subprocess.Popen[bytes] | None = None
        (tmp / "user" / "src" / "app").mkdir(parents=True)  # the project a harness example installs into
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.transcript: list[str] = []

    def _tool(self, name: str, body: str) -> None:
        path = self.bin / name
        path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        path.chmod(0o755)

    # --- running --------------------------------------------------------------------------------------------

    def run(self, block: Block) -> None:
        block = Block(block.page, block.line, block.lang, block.title,
                      block.body.replace("127.0.0.1:8787", f"127.0.0.1:{self.port}"))
        if not self.home.exists() and not (block.lang == "sh" and commands(block.body)[:1]
                                           and commands(block.body)[0].startswith("nerve init")):
            self.shell("nerve init", block)
        getattr(self, f"_{block.lang}")(block)

    def _text(self, block: Block) -> None:
        pass

    def _python(self, block: Block) -> None:
        first = block.body.splitlines()[0]
        named = re.match(r"^# ((?:senses|workflows)/[\w./-]+\.py)\b", first)
        if named:
            path = self.home / named.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.body, encoding="utf-8")
            if "(and an empty schema.py)" in first:
                (path.parent / "schema.py").touch()
            compile(block.body, str(path), "exec")
            return
        done = subprocess.run([sys.executable, "-c", block.body], cwd=self.home, env=self.env, capture_output=True,
                              text=True, timeout=scaled(60))
        assert done.returncode == 0, f"{block.where}: the example fails when run:\n{done.stderr}"

    def _yaml(self, block: Block) -> None:
        first = block.body.splitlines()[0].strip()
        named = re.match(r"^# ([\w./-]+\.pipeline\.ya?ml)$", first)
        if named:
            path = self.home / named.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.body, encoding="utf-8")
            return
        problems = fragment_problems(block.body)
        assert not problems, f"{block.where}: not a valid nerve.yaml: {problems}"
        if first == "# nerve.yaml":
            config = self.home / "nerve.yaml"
            data = _load(config.read_text(encoding="utf-8")) or {}
            _merge(data, _load(block.body) or {})
            config.write_text(_dump(data), encoding="utf-8")

    def _json(self, block: Block) -> None:
        data = json.loads(block.body)
        for server in (data.get("mcpServers") or {}).values():
            if server.get("command") == "nerve":
                self.shell(shlex.join(["nerve", *server.get("args", []), "--help"]), block)

    def _sh(self, block: Block) -> None:
        for command in commands(block.body):
            self.shell(command, block)

    def shell(self, command: str, block: Block) -> str:
        expected = int(m.group(1)) if (m := EXPECTED.search(command)) else 0
        code = _code_part(command).removesuffix("&").strip()
        self.transcript.append(f"$ {code}")
        if BACKGROUND.match(code):
            return self._start_engine(code, block)
        if FOR_A_WHILE.match(code):
            done = self._bash(f"timeout 4 {code}")
            assert done.returncode in (0, 124), f"{block.where}: `{code}` exited {done.returncode}:\n{done.stderr}"
            return done.stdout
        deadline = time.monotonic() + (scaled(30) if RETRIED.match(code) else 0)
        while True:
            done = self._bash(code)
            if done.returncode == expected or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.transcript.append(done.stdout + done.stderr)
        assert done.returncode == expected, (f"{block.where}: `{code}` exited {done.returncode}, not {expected}:\n"
                                             f"{done.stdout}{done.stderr}")
        return done.stdout

    def _bash(self, code: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["bash", "-c", code], cwd=self.home if self.home.exists() else self.tmp, env=self.env,
                              capture_output=True, text=True, timeout=scaled(120), stdin=subprocess.DEVNULL)

    def _start_engine(self, code: str, block: Block) -> str:
        assert self.engine is None, f"{block.where}: a second `nerve run` on one page"
        if "--for" not in code:
            code += " --for 300s"
        log = (self.tmp / "engine.log").open("wb")
        self.engine = subprocess.Popen(["bash", "-c", f"exec {code}"], cwd=self.home, env=self.env, stdout=log,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline:
            if self.engine.poll() is not None:
                raise AssertionError(f"{block.where}: `{code}` stopped: {(self.tmp / 'engine.log').read_text()}")
            if self._bash("nerve status >/dev/null 2>&1").returncode == 0:
                return ""
            time.sleep(0.2)
        raise AssertionError(f"{block.where}: `{code}` did not answer within the deadline")

    def close(self) -> None:
        if self.engine is not None and self.engine.poll() is None:
            os.killpg(self.engine.pid, signal.SIGINT)
            try:
                self.engine.wait(scaled(30))
            except subprocess.TimeoutExpired:
                os.killpg(self.engine.pid, signal.SIGKILL)
                self.engine.wait()
        self.chat.close()

    def gh_calls(self) -> list[dict[str, Any]]:
        if not self.gh_log.exists():
            return []
        return [json.loads(line) for line in self.gh_log.read_text(encoding="utf-8").splitlines()]


def _merge_the_pr(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The fake model's rule: offered a `merge_pr` tool and shown a passing CI result for a PR, merge it."""
    names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    said = json.dumps(body.get("messages"))
    pr = re.search(r'\\*"pr\\*":\s*(\d+)', said)
    if "merge_pr" in names and pr and re.search(r'\\*"ok\\*":\s*true', said):
        return "merge_pr", {"number": int(pr.group(1))}
    return None
