"""Which `llm` environment a process uses: its folder (keys, aliases, default model, logs.db) and default model.

A model-backed role runs in a workflow worker, which inherits the engine's
environment, not the shell's that asked for the thread: two folders mean two
default models and two sets of keys. The engine reports its own (`nerve
status`), `nerve doctor` and `nerve workflow run` compare it with the caller's,
and a role's setup error names it.

Read the way llm reads it (`llm.user_dir()`, `llm.get_default_model()`,
`llm logs status`) without importing llm (≈ 0.4 s): `LLM_USER_PATH`, else the
platform's config folder for `io.datasette.llm`; `default_model.txt` in it;
logging is on unless a `logs-off` file is there.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

APP = "io.datasette.llm"


@dataclass(frozen=True)
class LlmEnv:
    folder: str  # where llm keeps keys, aliases, the default model and logs.db
    from_env: bool  # set by LLM_USER_PATH (else llm's default folder)
    default_model: str | None  # `llm models default`; None: llm's built-in default
    logging: bool  # `llm logs on`: Nerve's model calls are logged to the folder's logs.db too

    def describe(self) -> str:
        """`llm folder /x (LLM_USER_PATH), default model echo`."""
        where = "LLM_USER_PATH" if self.from_env else "llm's default folder"
        model = self.default_model or "llm's built-in default"
        return f"llm folder {self.folder} ({where}), default model {model}"

    def same_models(self, other: "LlmEnv") -> bool:
        """Whether a role without its own model would call the same model with the same keys under both."""
        return (self.folder, self.default_model) == (other.folder, other.default_model)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LlmEnv":
        return cls(str(data["folder"]), bool(data["from_env"]), data.get("default_model"), bool(data["logging"]))


def llm_env(environ: Mapping[str, str] | None = None) -> LlmEnv:
    """This process's llm environment (or the one `environ` would give)."""
    environ = os.environ if environ is None else environ
    given = environ.get("LLM_USER_PATH")
    folder = Path(given).expanduser() if given else default_folder(environ)
    try:
        default = (folder / "default_model.txt").read_text(encoding="utf-8").strip() or None
    except OSError:
        default = None
    return LlmEnv(str(folder), bool(given), default, not (folder / "logs-off").exists())


def default_folder(environ: Mapping[str, str]) -> Path:
    """llm's folder without LLM_USER_PATH: click.get_app_dir("io.datasette.llm"), as llm asks for it."""
    home = Path(environ.get("HOME") or Path.home())
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / APP
    if sys.platform == "win32":
        return Path(environ.get("APPDATA") or home) / APP
    return Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / APP


def mismatch(engine: LlmEnv, here: LlmEnv, workflow: str | None = None) -> str | None:
    """What to say when a thread in the engine would call other models than the caller expects; None if alike."""
    if engine.same_models(here):
        return None
    fix = f"or set workflows.{workflow}.model in nerve.yaml" if workflow else "or set the workflow's model"
    return (f"the engine's model-backed roles use {engine.describe()}; yours is {here.describe()}. A role without "
            f"its own model calls the engine's default with the engine's keys: start the engine with "
            f"LLM_USER_PATH={here.folder} (`nerve service install --env LLM_USER_PATH={here.folder}` for a "
            f"service), {fix}")
