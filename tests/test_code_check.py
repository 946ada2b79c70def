"""`nerve config check` imports senses and workflows in a child process and reports what would not load."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

from enginekit import write_instance
from typer.testing import CliRunner

from nerve_cli.cli import output
from nerve_cli.cli.app import app

CONFIG = """
    senses:
      good: {}
      broken: {}
    reflexes: []
"""
GOOD = """
    import os, pathlib
    pathlib.Path(os.environ["NERVE_TEST_MARK"]).write_text(str(os.getpid()))
    print("a print at import time")

    def compute(db, peers):
        return 1
"""


def check(*args: str):
    output.reset()
    result = CliRunner().invoke(app, ["config", "check", *args])
    output.reset()
    return result


def test_syntax_error_with_file_and_line_without_importing_into_the_cli_process(home: Path, tmp_path: Path,
                                                                                monkeypatch) -> None:
    mark = tmp_path / "imported-by"
    monkeypatch.setenv("NERVE_TEST_MARK", str(mark))
    write_instance(home, CONFIG, {"good": GOOD, "broken": "def compute(db, peers)\n    return 1\n"})
    result = check()
    assert result.exit_code == 1, result.output
    assert "senses/broken/sense.py:1: error: senses.broken: SyntaxError: expected ':'" in result.stdout
    assert "good" not in result.stdout.split("nerve.yaml is valid")[0]  # the good sense loads
    assert "code would not load: 1 error" in result.stdout
    assert "a print at import time" not in result.stdout
    assert mark.read_text() != str(os.getpid())  # user code ran, in another process
    assert not [m for m in sys.modules if m.startswith(("_nerve_senses.good", "_nerve_senses.broken"))]


def test_fast_skips_the_import(home: Path, tmp_path: Path, monkeypatch) -> None:
    mark = tmp_path / "imported-by"
    monkeypatch.setenv("NERVE_TEST_MARK", str(mark))
    write_instance(home, CONFIG, {"good": GOOD, "broken": "def compute(db, peers)\n    return 1\n"})
    result = check("--fast")
    assert result.exit_code == 0, result.output
    assert not mark.exists()


def problems(home: Path) -> dict[str, dict]:
    result = check("--json")
    return {p["path"]: p for p in json.loads(result.stdout)["problems"]}


def test_missing_compute_bad_arity_generator_and_import_error(home: Path) -> None:
    write_instance(home, """
        senses:
          none: {}
          three: {}
          gen: {}
          imports: {}
          fine: {}
        reflexes: []
    """, {
        "none": "def compute_it(db, peers):\n    return 1\n",
        "three": "x = 1\n\ndef compute(db, peers, trigger, extra):\n    return 1\n",
        "gen": "def compute(db, peers):\n    yield 1\n",
        "imports": "import os\nimport no_such_module_here\n",
        "fine": "async def compute(db):\n    return 1\n",
    })
    found = problems(home)
    assert set(found) == {"senses.none", "senses.three", "senses.gen", "senses.imports"}
    assert "defines no `compute(db, peers)`" in found["senses.none"]["message"]
    three = found["senses.three"]
    assert (three["file"], three["line"]) == ("senses/three/sense.py", 3)
    assert "4 required arguments (db, peers, trigger, extra)" in three["message"]
    assert "generator" in found["senses.gen"]["message"]
    imports = found["senses.imports"]
    assert imports["message"].startswith("ModuleNotFoundError: No module named 'no_such_module_here'")
    assert (imports["file"], imports["line"]) == ("senses/imports/sense.py", 2)


def workflow_instance(home: Path, files: dict[str, str]) -> None:
    names = "".join(f"  {n}: {{}}\n" for n in files)
    write_instance(home, "senses: {}\nworkflows:\n" + names, {})
    (home / "workflows").mkdir()
    for name, text in files.items():
        (home / "workflows" / f"{name}.py").write_text(text)


ROLE = textwrap.dedent("""
    from nerve_cli.sdk import END, RoleResult, WorkflowDefinition

    async def author(messages):
        return RoleResult("x", {})
""")


def test_workflow_without_object_async_moderator_and_bad_arity(home: Path) -> None:
    workflow_instance(home, {
        "ok": ROLE + "\ndef moderator(messages):\n    return END\n\n"
                     "workflow = WorkflowDefinition(roles={'author': author}, moderator=moderator)\n",
        "noobj": ROLE,
        "asyncmod": ROLE + "\nasync def moderator(messages):\n    return END\n\n"
                           "workflow = WorkflowDefinition(roles={'author': author}, moderator=moderator)\n",
        "arity": ROLE + "\ndef moderator(messages, state):\n    return END\n\n"
                        "workflow = WorkflowDefinition(roles={'author': author}, moderator=moderator)\n",
        "syntax": "workflow = (\n",
    })
    found = problems(home)
    assert set(found) == {"workflows.noobj", "workflows.asyncmod", "workflows.arity", "workflows.syntax"}
    assert "defines no `workflow`" in found["workflows.noobj"]["message"]
    asyncmod = found["workflows.asyncmod"]
    assert "moderator is async" in asyncmod["message"] and asyncmod["line"] == 7
    assert asyncmod["file"] == "workflows/asyncmod.py"
    assert "2 required arguments (messages, state)" in found["workflows.arity"]["message"]
    syntax = found["workflows.syntax"]
    assert syntax["file"] == "workflows/syntax.py" and syntax["line"] == 1 and "SyntaxError" in syntax["message"]


def test_a_file_blocking_at_import_is_named_when_the_check_gives_up(home: Path) -> None:
    from nerve_cli.config.code import check_code

    write_instance(home, CONFIG, {"good": "def compute(db, peers):\n    return 1\n",
                                  "broken": "import time\ntime.sleep(600)\n\ndef compute(db, peers):\n    return 1\n"})
    found = check_code(home, ["good", "broken"], [], timeout=8)
    assert len(found) == 1 and found[0].file == "senses/broken/", found
    assert found[0].path == "senses.broken"
    assert found[0].message.startswith("did not finish importing within 8s: does it block at import time")


def test_the_early_check_is_kept_only_for_what_the_validated_config_asks(home: Path, tmp_path: Path,
                                                                         monkeypatch) -> None:
    """config check starts its child before validating nerve.yaml; an answer about other senses never shows."""
    from nerve_cli.config.check import check_instance

    monkeypatch.setenv("NERVE_TEST_MARK", str(tmp_path / "imported-by"))
    from nerve_cli.config.code import CodeCheck, early_check

    write_instance(home, CONFIG, {"good": GOOD, "broken": "def compute(db, peers)\n    return 1\n"})
    report = check_instance(home, early=early_check(home))  # the child's own read of nerve.yaml: kept
    assert [p.file for p in report.problems] == ["senses/broken/sense.py"]
    report = check_instance(home, early=CodeCheck(home, ["good"], []))  # about other senses: checked again
    assert [p.file for p in report.problems] == ["senses/broken/sense.py"]
    (home / "nerve.yaml").write_text((home / "nerve.yaml").read_text() + "bogus_key: 1\n")
    report = check_instance(home, early=early_check(home))  # an invalid nerve.yaml: no code problems at all
    assert not report.valid and "senses/broken/sense.py" not in [p.file for p in report.problems]
