"""An offline `llm` for the tests: the llm-echo plugin's `echo` model, with llm's config in a tmp folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture
def llm_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """LLM_USER_PATH in a tmp folder (inherited by the engine and its workers): the user's llm config is never touched."""
    folder = tmp_path / "llm-user"
    folder.mkdir()
    monkeypatch.setenv("LLM_USER_PATH", str(folder))
    for name in ("OPENAI_API_KEY", "LLM_ECHO_NEEDS_KEY_KEY"):
        monkeypatch.delenv(name, raising=False)
    return folder


def llm_cli(*args: str) -> subprocess.CompletedProcess:
    """The real `llm` command (python -m llm), with the test's LLM_USER_PATH."""
    return subprocess.run([sys.executable, "-m", "llm", *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))


HANG_PLUGIN = '''
"""A model that never answers (a provider that accepted the request and went silent): `hang` (sync) and
its async form. Each call appends its start (time.monotonic) to $NERVE_TEST_HANG_LOG."""
import asyncio, os, time

import llm


def _started():
    with open(os.environ["NERVE_TEST_HANG_LOG"], "a") as fh:
        fh.write(f"{time.monotonic()}\\n")


class Hang(llm.Model):
    model_id = "hang"

    def execute(self, prompt, stream, response, conversation=None):
        _started()
        time.sleep(3600)  # blocks its thread: nothing can cancel it
        yield "never"


class HangAsync(llm.AsyncModel):
    model_id = "hang"

    async def execute(self, prompt, stream, response, conversation=None):
        _started()
        await asyncio.sleep(3600)
        yield "never"


@llm.hookimpl
def register_models(register):
    register(Hang(), HangAsync())
'''


@pytest.fixture
def hang_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, llm_home: Path) -> Path:
    """The `hang` model as a real llm plugin (a module and its dist-info entry point on PYTHONPATH, found by
    llm as an installed plugin in the engine's workers too). Returns the file each call's start is logged to."""
    site = tmp_path / "hang-plugin"
    info = site / "llm_hang-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "llm_hang.py").write_text(HANG_PLUGIN)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-hang\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[llm]\nhang = llm_hang\n")
    log = tmp_path / "hang-calls.txt"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("NERVE_TEST_HANG_LOG", str(log))
    return log


def tool_results(content: str) -> list[str]:
    """The tool results echo saw in its last call: a turn's text is each model call's text in turn (echo's
    JSON each)."""
    import json

    decoder, at, last = json.JSONDecoder(), 0, {}
    while at < len(content):
        last, at = decoder.raw_decode(content, at)
        while at < len(content) and content[at].isspace():
            at += 1
    return [r["output"] for r in last.get("tool_results", [])]
