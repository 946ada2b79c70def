"""Where the instance lives: --home PATH > $NERVE_HOME > ~/.uncaged-nerve."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nerve_cli.cli.app import app
from nerve_cli.errors import InstanceNotFound
from nerve_cli.home import require_instance, resolve_home

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance"
runner = CliRunner()


def make_instance(path: Path, config: str | None = None) -> Path:
    shutil.copytree(TEMPLATE, path)
    if config is not None:
        (path / "nerve.yaml").write_text(config)
    return path


def test_option_beats_env_beats_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("NERVE_HOME", str(tmp_path / "from-env"))
    assert resolve_home(tmp_path / "from-option") == tmp_path / "from-option"
    assert resolve_home(None) == tmp_path / "from-env"
    monkeypatch.delenv("NERVE_HOME")
    assert resolve_home(None) == tmp_path / "user" / ".uncaged-nerve"


def test_home_option_wins_over_nerve_home_in_the_cli(tmp_path: Path) -> None:
    good = make_instance(tmp_path / "good")
    bad = make_instance(tmp_path / "bad", "senses:\n  a: {throttle: 1}\n")
    result = runner.invoke(app, ["config", "check", "--home", str(good), "--json"], env={"NERVE_HOME": str(bad)})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["valid"] is True
    result = runner.invoke(app, ["config", "check", "--json"], env={"NERVE_HOME": str(bad)})
    assert result.exit_code == 1
    assert json.loads(result.stdout)["problems"][0]["path"] == "senses.a.throttle"


def test_default_home_is_used_without_option_or_env(tmp_path: Path) -> None:
    user = tmp_path / "user"
    make_instance(user / ".uncaged-nerve")
    result = runner.invoke(app, ["config", "check"], env={"NERVE_HOME": None, "HOME": str(user)})
    assert result.exit_code == 0, result.output
    assert "nerve.yaml is valid" in result.stdout


@pytest.mark.parametrize("source", ["option", "env"])
def test_no_instance_message_names_the_folder_and_the_fix(tmp_path: Path, source: str) -> None:
    missing = tmp_path / "nowhere"
    args = ["config", "check"] + (["--home", str(missing)] if source == "option" else [])
    result = runner.invoke(app, args, env={"NERVE_HOME": str(missing)})
    assert result.exit_code == 1
    assert f"no Nerve instance at {missing}" in result.stderr
    assert f"Run `nerve init --home {missing}` to create one." in result.stderr
    assert ("--home" if source == "option" else "$NERVE_HOME") in result.stderr.split("there is no")[0]


def test_require_instance_needs_a_nerve_yaml(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InstanceNotFound):
        require_instance(tmp_path / "empty")
    make_instance(tmp_path / "ok")
    assert require_instance(tmp_path / "ok") == tmp_path / "ok"
