"""`nerve init`: a fresh instance with a first commit; refusals change nothing; no git identity needed."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nerve_cli.cli.app import app
from nerve_cli.instance.scaffold import FIRST_COMMIT, templates_dir

runner = CliRunner()
SENSES = ("cpu-percent", "disk-usage", "memory-usage")


def git_out(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def no_identity(tmp_path: Path) -> dict[str, str]:
    """Environment for CliRunner with no git identity configured anywhere."""
    fake_home = tmp_path / "fake-user-home"
    fake_home.mkdir()
    return {
        "HOME": str(fake_home),
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": None,
        "GIT_AUTHOR_EMAIL": None,
        "GIT_COMMITTER_NAME": None,
        "GIT_COMMITTER_EMAIL": None,
        "EMAIL": None,
    }


def test_init_creates_an_instance_with_one_commit(tmp_path: Path) -> None:
    home = tmp_path / "deep" / "new-home"
    result = runner.invoke(app, ["init", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "Created a Nerve instance" in result.stdout
    assert f"nerve config check --home {home}" in result.stdout and "nerve run" in result.stdout
    for name in SENSES:
        assert (home / "senses" / name / "sense.py").is_file()
        assert (home / "senses" / name / "schema.py").is_file()
    assert (home / ".gitignore").read_text().split()[-4:] == ["data/", "__pycache__/", "*.pyc", ".venv/"]
    assert (home / "requirements.txt").is_file()
    assert git_out(home, "log", "--format=%s").splitlines() == [FIRST_COMMIT]
    assert git_out(home, "status", "--porcelain") == ""
    tracked = set(git_out(home, "ls-files").split())
    assert {"nerve.yaml", ".gitignore", "requirements.txt", "senses/cpu-percent/sense.py"} <= tracked
    assert not [p for p in home.parent.iterdir() if p.name.startswith(".")]  # no staging folder left


def test_fresh_instance_passes_config_check(tmp_path: Path) -> None:
    home = tmp_path / "inst"
    assert runner.invoke(app, ["init", "--home", str(home)]).exit_code == 0
    result = runner.invoke(app, ["config", "check", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "nerve.yaml is valid: 3 senses, 3 reflexes, 0 workflows" in result.stdout


def test_init_uses_nerve_home_when_no_option(home: Path) -> None:
    result = runner.invoke(app, ["init"], env={"NERVE_HOME": str(home)})
    assert result.exit_code == 0, result.output
    assert (home / "nerve.yaml").is_file()
    assert "nerve config check\n" in result.stdout or "nerve config check " in result.stdout
    assert "--home" not in result.stdout


def test_init_refuses_an_existing_instance_and_changes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "inst"
    assert runner.invoke(app, ["init", "--home", str(home)]).exit_code == 0
    (home / "nerve.yaml").write_text("# my own edits\n")
    before = snapshot(home)
    result = runner.invoke(app, ["init", "--home", str(home)])
    assert result.exit_code == 1
    assert "already a Nerve instance" in result.stderr and "nothing was changed" in result.stderr
    assert snapshot(home) == before
    assert len(git_out(home, "log", "--format=%s").splitlines()) == 1


def test_init_refuses_a_non_empty_folder_and_says_whats_there(tmp_path: Path) -> None:
    home = tmp_path / "stuff"
    home.mkdir()
    (home / "notes.txt").write_text("mine")
    (home / "photos").mkdir()
    result = runner.invoke(app, ["init", "--home", str(home)])
    assert result.exit_code == 1
    assert "not empty and is not a Nerve instance" in result.stderr
    assert "notes.txt, photos" in result.stderr
    assert sorted(p.name for p in home.iterdir()) == ["notes.txt", "photos"]


def test_init_refuses_a_file(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("x")
    result = runner.invoke(app, ["init", "--home", str(target)])
    assert result.exit_code == 1 and "not a folder" in result.stderr
    assert target.read_text() == "x"


def test_init_into_an_existing_empty_folder(tmp_path: Path) -> None:
    home = tmp_path / "empty"
    home.mkdir()
    result = runner.invoke(app, ["init", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert (home / "nerve.yaml").is_file() and (home / ".git").is_dir()


def test_init_without_git_identity_uses_the_fallback_and_says_so(tmp_path: Path, no_identity: dict) -> None:
    home = tmp_path / "inst"
    result = runner.invoke(app, ["init", "--home", str(home)], env=no_identity)
    assert result.exit_code == 0, result.output
    assert "Nerve <nerve@localhost>" in result.stderr
    assert "git config --global user.name" in result.stderr
    env = {**os.environ, "HOME": no_identity["HOME"], "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    log = subprocess.run(["git", "-C", str(home), "log", "--format=%an <%ae>"], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert log.strip() == "Nerve <nerve@localhost>"


def test_init_with_an_identity_does_not_warn(tmp_path: Path, no_identity: dict) -> None:
    env = {**no_identity, "GIT_AUTHOR_NAME": None}
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text("[user]\n\tname = Ada\n\temail = ada@example.com\n")
    env["GIT_CONFIG_GLOBAL"] = str(gitconfig)
    home = tmp_path / "inst"
    result = runner.invoke(app, ["init", "--home", str(home)], env=env)
    assert result.exit_code == 0, result.output
    assert "nerve@localhost" not in result.output
    assert git_out(home, "log", "--format=%an").strip() == "Ada"


def test_python_dash_m_nerve_init_in_a_real_process(tmp_path: Path) -> None:
    home = tmp_path / "proc-home"
    env = {k: v for k, v in os.environ.items() if k != "NERVE_HOME"}
    out = subprocess.run([sys.executable, "-m", "nerve_cli", "init", "--home", str(home)],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "Created a Nerve instance" in out.stdout
    assert (home / "nerve.yaml").is_file()
    assert git_out(home, "log", "--format=%s").strip() == FIRST_COMMIT


def test_template_senses_are_real_python_using_the_sdk() -> None:
    """Parsed, never imported: nerve_cli.sdk.table is another part's code."""
    root = templates_dir()
    for name in SENSES:
        schema = ast.parse((root / "senses" / name / "schema.py").read_text())
        sense = ast.parse((root / "senses" / name / "sense.py").read_text())
        imports = {(n.module, a.name) for n in ast.walk(schema) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert ("nerve_cli.sdk", "table") in imports
        computes = [n for n in sense.body if isinstance(n, ast.FunctionDef) and n.name == "compute"]
        assert computes and [a.arg for a in computes[0].args.args] == ["db", "peers"]
        assert "psutil" in (root / "senses" / name / "sense.py").read_text()
    cpu = (root / "senses" / "cpu-percent" / "sense.py").read_text()
    # the first reading is taken at import, so the first compute measures a real window
    assert cpu.index("_previous = (time.monotonic(), psutil.cpu_times())") < cpu.index("def compute")


def test_the_named_sequence_works_verbatim_on_a_fresh_instance(home: Path) -> None:
    """`nerve init`, `nerve sense new cpu-usage`, `nerve run`, `nerve thread show run-7`, `nerve archive`:
    init's examples leave the names a user is told to create free, and a deleted name says how to free it."""
    from enginekit import nerve

    def cli(*args: str):
        result = runner.invoke(app, [*args, "--home", str(home)])
        return result.exit_code, result.output

    assert cli("init")[0] == 0
    code, out = cli("sense", "new", "cpu-usage")
    assert code == 0, out
    ran = nerve("run", "--for", "1s", home=home, timeout=60)
    assert ran.returncode == 0, ran.stderr[-2000:]
    code, out = cli("thread", "show", "run-7")
    assert code == 1 and "no thread run-7" in out and "nerve workflow run" in out, out
    code, out = cli("archive")
    assert code == 0, out

    assert cli("sense", "delete", "cpu-usage")[0] == 0
    code, out = cli("sense", "new", "cpu-usage")
    assert code == 1 and "was deleted" in out and "nerve gc --older-than 0s" in out, out
    assert "attic/senses/cpu-usage." in out and "nerve sense enable cpu-usage" in out
    assert cli("gc", "--older-than", "0s")[0] == 0
    code, out = cli("sense", "new", "cpu-usage")
    assert code == 0, out
