"""Shared fixtures: every test gets its own NERVE_HOME, never the real one."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("TERMINAL_WIDTH", "200")
os.environ.setdefault("COLUMNS", "200")
os.environ["_TYPER_FORCE_DISABLE_TERMINAL"] = "1"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "nerve-home"
    monkeypatch.setenv("NERVE_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    # llm keeps its keys, default model and logs here: never the user's real llm config
    monkeypatch.setenv("LLM_USER_PATH", str(tmp_path / "llm-user"))
    return home


@pytest.fixture
def home(_isolated_home: Path) -> Path:
    """The instance folder NERVE_HOME points at (not created)."""
    return _isolated_home
