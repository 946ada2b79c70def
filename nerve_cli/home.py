"""Where the instance lives: --home PATH > $NERVE_HOME > ~/.uncaged-nerve."""

from __future__ import annotations

import os
from pathlib import Path

from nerve_cli.errors import InstanceNotFound

DEFAULT_HOME = Path("~/.uncaged-nerve")
CONFIG_FILE = "nerve.yaml"


def resolve_home(option: str | Path | None = None) -> Path:
    """The instance folder the user means, whether or not it exists yet."""
    if option:
        return Path(option).expanduser().resolve()
    env = os.environ.get("NERVE_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return DEFAULT_HOME.expanduser().resolve()


def require_instance(option: str | Path | None = None) -> Path:
    """The instance folder, or an error that says where we looked and what to run."""
    home = resolve_home(option)
    if not (home / CONFIG_FILE).is_file():
        how = "--home" if option else ("$NERVE_HOME" if os.environ.get("NERVE_HOME") else "the default")
        raise InstanceNotFound(
            f"no Nerve instance at {home} (from {how}): there is no {CONFIG_FILE} there. "
            f"Run `nerve init --home {home}` to create one."
        )
    return home


class Layout:
    """Paths inside an instance folder, in one place."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.config = home / CONFIG_FILE
        self.senses = home / "senses"
        self.workflows = home / "workflows"
        self.data = home / "data"
        self.logs_db = self.data / "logs.db"
        self.events_db = self.data / "events.db"  # external events (`nerve emit`), see store/events.py
        self.agents_db = self.data / "agents.db"  # the agents' inboxes: cursors, deliveries, see store/inbox.py
        self.fleet_db = self.data / "fleet.db"  # what this host has published to its fleet, see store/fleet.py
        self.sense_data = self.data / "senses"
        self.archive = self.data / "archive"
        self.blobs = self.data / "blobs"
        self.socket = self.data / "nerve.sock"
        self.lock = self.data / "nerve.lock"
        self.attic = home / "attic"  # deleted senses and workflows, kept (and committed) until `nerve gc`

    def sense_dir(self, name: str) -> Path:
        return self.senses / name

    def sense_db(self, name: str) -> Path:
        return self.sense_data / f"{name}.db"

    def sense_archive(self, name: str) -> Path:
        """A sense's archived days (JSONL, one folder per table), under data/archive/senses/."""
        return self.archive / "senses" / name

    def migrations(self, name: str) -> Path:
        return self.senses / name / "migrations"

    def workflow_file(self, name: str) -> Path:
        """The file defining workflow `name`: a pipeline (NAME.pipeline.yaml, .yml or .json) when there is one,
        else NAME.py (whether or not it exists)."""
        for suffix in (".pipeline.yaml", ".pipeline.yml", ".pipeline.json"):
            if (self.workflows / f"{name}{suffix}").is_file():
                return self.workflows / f"{name}{suffix}"
        return self.workflows / f"{name}.py"
