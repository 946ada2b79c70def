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
