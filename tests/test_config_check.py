"""`nerve config check`: problems with key path and line, channels, verdict, --json, exit codes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from nerve_cli.cli.app import app

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance"
runner = CliRunner()


@pytest.fixture
def instance(home: Path) -> Path:
    """A copy of the instance template (no git needed to check a config)."""
    shutil.copytree(TEMPLATE, home)
    return home


def write_config(home: Path, text: str) -> Path:
    path = home / "nerve.yaml"
    path.write_text(text)
    return path


def check(*args: str):
    return runner.invoke(app, ["config", "check", *args])


THREE_MISTAKES = """\
senses:
  cpu-percent:
    group: system
    throttle: 5
  memory-usage: {group: system, thottle: 5s}
  disk-usage: {group: system}
reflexes:
  - sense: cpu-percent
    interval: 10s
  - sense: memory-usage
    interval: 15s
  - workflow: cleanup
    on: [disk-usage]
"""


def test_three_mistakes_three_problems_with_path_and_line(instance: Path) -> None:
    path = write_config(instance, THREE_MISTAKES)
    before = path.read_bytes(), path.stat().st_mtime_ns
    result = check()
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("nerve.yaml:")]
    assert len(lines) == 3, result.stdout
    assert lines[0].startswith("nerve.yaml:4: error: senses.cpu-percent.throttle: expected a duration")
    assert lines[1].startswith("nerve.yaml:5: error: senses.memory-usage.thottle: unknown key")
    assert "did you mean `throttle`?" in lines[1]
    assert lines[2].startswith("nerve.yaml:12: error: reflexes[2].workflow: ")
    assert "SenseResult" in lines[2]
    assert "nerve.yaml is invalid: 3 errors" in result.stdout
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_template_instance_is_valid(instance: Path) -> None:
    result = check()
    assert result.exit_code == 0, result.output
    assert "nerve.yaml is valid: 3 senses, 3 reflexes, 0 workflows; 0 external channels" in result.stdout


def test_syntax_error_shows_line_and_column(instance: Path) -> None:
    write_config(instance, "senses:\n  cpu-percent: {group: system\nreflexes: []\n")
    result = check()
    assert result.exit_code == 1
    assert re.search(r"^nerve\.yaml:\d+:\d+: error: YAML syntax error", result.stdout, re.M), result.stdout


def test_channels_are_listed_with_the_nearest_sense(instance: Path) -> None:
    text = (TEMPLATE / "nerve.yaml").read_text().replace(
        "    interval: 1m\n", "    interval: 1m\n  - sense: disk-usage\n    on: [task.created, cpu-percnt]\n"
    )
    write_config(instance, text)
    result = check()
    assert result.exit_code == 0, result.output  # warnings do not fail the check
    assert "External channels" in result.stdout
    assert "task.created" in result.stdout
    assert re.search(r"cpu-percnt .*did you mean sense `cpu-percent`\?", result.stdout)
    assert re.search(r"^nerve\.yaml:\d+: warning: reflexes\[3\]\.on\[1\]: ", result.stdout, re.M)
    assert "2 external channels" in result.stdout and "1 warning" in result.stdout


def test_json_output_shape(instance: Path) -> None:
    write_config(instance, THREE_MISTAKES.replace("interval: 15s", "on: [task.created]"))
    result = check("--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert set(data) == {"version", "valid", "problems", "channels", "counts", "patterns"}
    assert data["valid"] is False
    assert len(data["problems"]) == 3
    for problem in data["problems"]:
        assert set(problem) == {"path", "message", "severity", "line", "file"}
    assert data["problems"][0] == {
        "path": "senses.cpu-percent.throttle",
        "message": "expected a duration like 500ms, 90s, 10m, 1h30m, 2d or 1w, got 5",
        "severity": "error",
        "line": 4,
        "file": "nerve.yaml",
    }
    assert data["channels"] == [{"name": "task.created", "reflexes": [1], "did_you_mean": None, "fed_by": "emit"}]


def test_json_valid(instance: Path) -> None:
    result = check("--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert (data["version"], data["valid"], data["problems"], data["channels"]) == (1, True, [], [])


def test_missing_sense_files_are_errors_and_missing_migrations_a_warning(instance: Path) -> None:
    (instance / "senses" / "cpu-percent" / "sense.py").unlink()
    shutil.rmtree(instance / "senses" / "memory-usage" / "migrations")
    data = json.loads(check("--json").stdout)
    by_severity = {(p["severity"], p["path"]): p["message"] for p in data["problems"]}
    assert "senses/cpu-percent/sense.py does not exist" in by_severity[("error", "senses.cpu-percent")]
    assert "nerve sense migrate memory-usage" in by_severity[("warning", "senses.memory-usage")]
    assert data["valid"] is False
    in_yaml = [p["line"] for p in data["problems"] if p["file"] == "nerve.yaml"]
    assert in_yaml == sorted(in_yaml)
    drift = [p for p in data["problems"] if p["file"] == "senses/memory-usage/schema.py"]
    assert "nerve sense migrate memory-usage" in drift[0]["message"]  # the engine would refuse it: an error


def test_disabled_sense_needs_no_files(instance: Path) -> None:
    shutil.rmtree(instance / "senses" / "disk-usage")
    text = (TEMPLATE / "nerve.yaml").read_text().replace("    enabled: true\n", "    enabled: false\n")
    write_config(instance, text)
    data = json.loads(check("--json").stdout)
    assert data["valid"] is True, data
    assert [p["path"] for p in data["problems"]] == ["reflexes[2].sense"]  # the warning only


def test_workflow_file_must_exist_and_stray_files_are_warned(instance: Path) -> None:
    write_config(instance, (TEMPLATE / "nerve.yaml").read_text() + "  cleanup: {concurrency: 1}\n")
    (instance / "workflows").mkdir()
    (instance / "workflows" / "review.py").write_text("workflow = None\n")
    stray = instance / "senses" / "unlisted"
    stray.mkdir()
    (stray / "sense.py").write_text("def compute(db, peers):\n    return 1\n")
    result = check()
    assert result.exit_code == 1
    assert "error: workflows.cleanup: workflows/cleanup.py does not exist" in result.stdout
    assert "warning: workflows: workflows/review.py is not in nerve.yaml" in result.stdout
    assert "warning: senses: senses/unlisted/ is not in nerve.yaml" in result.stdout


def test_no_instance_says_how_to_create_one(home: Path) -> None:
    result = check()
    assert result.exit_code == 1
    assert f"no Nerve instance at {home}" in result.stderr
    assert f"nerve init --home {home}" in result.stderr


def test_config_check_imports_nothing_heavy(instance: Path) -> None:
    """No git, sqlite_utils, watchfiles or engine on the `config check` path (start-up time)."""
    code = (
        "import sys\n"
        "from nerve_cli.cli.app import main\n"
        f"sys.argv = ['nerve', 'config', 'check', '--home', {str(instance)!r}]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    assert exc.code in (0, None), exc.code\n"
        # (PyYAML is: libyaml reads nerve.yaml for validation, 3 ms quicker than ruamel with its import counted)
        "heavy = ('sqlite_utils', 'git', 'watchfiles', 'nerve_cli.kernel', 'nerve_cli.store')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy[3:5])))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_a_schema_without_tables_needs_no_migrations_folder_and_a_paths_sense_is_not_on_demand(home: Path) -> None:
    """An empty schema.py left a "run nerve sense migrate" warning the command could not clear (it writes
    nothing for no tables), and sense list showed a sense driven by `paths:` as "on demand"."""
    import json

    from conftest import cli
    from enginekit import write_instance

    write_instance(home, """
        senses:
          plain: {}
          notes: {}
        reflexes:
          - {sense: notes, paths: ["docs/*.md"]}
    """, {"plain": "def compute(db, peers):\\n    return 1\\n", "notes": "def compute(db, peers):\\n    return 1\\n"})
    for sense in ("plain", "notes"):
        (home / "senses" / sense / "schema.py").write_text("")
        (home / "senses" / sense / "migrations").rmdir()
    (home / "docs").mkdir()
    checked = json.loads(cli("config", "check", "--json").stdout)
    assert not [p for p in checked["problems"] if "migrations/ does not exist" in p["message"]], checked["problems"]
    (home / "senses" / "plain" / "schema.py").write_text(
        "from nerve_cli.sdk import table\\n\\n@table(pk='ts')\\nclass Row:\\n    ts: int\\n")
    checked = json.loads(cli("config", "check", "--json").stdout)
    assert [p["path"] for p in checked["problems"] if "migrations/ does not exist" in p["message"]] == ["senses.plain"]
    listed = {s["name"]: s["triggers"] for s in json.loads(cli("sense", "list", "--json").stdout)["senses"]}
    assert listed["notes"] == ["on files docs/*.md"]
    assert "on files docs/*.md" in cli("sense", "list").stdout


def test_a_channel_a_thread_waits_for_or_the_fleet_publishes_is_listened_to(home: Path) -> None:
    """`config check` warned "no reflex listens to channel" for channels a workflow waits for and ones
    fleet.publish.channels sends to other hosts."""
    import textwrap

    from conftest import cli
    from enginekit import write_instance

    write_instance(home, """
        senses: {}
        channels:
          ci.done: {}
          deploys: {}
          nobody: {}
        workflows:
          waits: {}
        fleet:
          servers: [nats://127.0.0.1:4222]
          host: alpha
          publish: {channels: [deploys]}
    """, {})
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / "waits.py").write_text(textwrap.dedent("""
        from nerve_cli.sdk import END, WorkflowDefinition, wait_for_event

        async def waiter(messages):
            return wait_for_event("ci.done", match={"pr": 1})

        workflow = WorkflowDefinition(roles={"waiter": waiter}, moderator=lambda m: "waiter" if len(m) < 2 else END)
    """))
    checked = json.loads(cli("config", "check", "--json").stdout)
    unheard = sorted(p["path"] for p in checked["problems"] if "no reflex listens" in p["message"])
    assert unheard == ["channels.nobody"], checked["problems"]


FAKE_PYDANTIC_PLUGIN = """\
import os
import pathlib

pathlib.Path(os.environ["PLUGIN_MARK"]).write_text("loaded")


class _Plugin:
    def new_schema_validator(self, *args, **kwargs):
        return None, None, None


plugin = _Plugin()
"""


def test_nerve_yaml_is_validated_without_looking_for_pydantic_plugins_and_others_still_find_them(
        instance: Path, tmp_path: Path) -> None:
    """Looking for plugins reads every installed package's metadata (~30 ms of a check); Nerve's own models do
    not need them, and the switch is pydantic's own variable, set only while those models are built."""
    site = tmp_path / "site"
    meta = site / "fakeplugin-0.1.dist-info"
    meta.mkdir(parents=True)
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplugin\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text("[pydantic]\nfake = fakeplugin:plugin\n")
    (site / "fakeplugin.py").write_text(FAKE_PYDANTIC_PLUGIN)
    mark = tmp_path / "mark"
    env = {**os.environ, "PYTHONPATH": str(site), "PLUGIN_MARK": str(mark), "NERVE_HOME": str(instance)}
    env.pop("PYDANTIC_DISABLE_PLUGINS", None)
    done = subprocess.run([sys.executable, "-m", "nerve_cli", "config", "check", "--fast"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not mark.exists(), "config check looked for pydantic plugins and loaded one"
    after = ("import os, sys\nimport nerve_cli.config.model\nassert 'PYDANTIC_DISABLE_PLUGINS' not in os.environ\n"
             # pydantic's loader imports importlib.metadata (13 ms) even with plugins off: it stood aside
             "assert 'importlib.metadata' not in sys.modules, 'the plugin loader was imported'\n"
             "from pydantic import BaseModel\nclass M(BaseModel):\n    x: int\n")
    done = subprocess.run([sys.executable, "-c", after], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert mark.read_text() == "loaded", "a model built after Nerve's finds the installed plugin"
