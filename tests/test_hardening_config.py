"""nerve.yaml that is hostile by accident: alias bombs, deep nesting, bytes that are not UTF-8,
values of the wrong kind, loops too many to count. Each gets a clear problem, quickly,
from `nerve config check` and from the running engine, which keeps its config and answers.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from enginekit import RunningEngine, read_logs, wait_for, write_instance
from typer.testing import CliRunner

from nerve_cli.cli.app import app

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance"
runner = CliRunner()


def alias_bomb(levels: int = 9, fan: int = 9, duplicate: bool = False) -> str:
    """The 1.4 KB file of the report: each level lists the previous one `fan` times.

    duplicate: the top alias is the value of a key given twice under `engine:`,
    where ruamel's duplicate-key message would print the whole expansion.
    """
    lines = [f"a0: &a0 [{', '.join(['lol'] * fan)}]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * fan)}]" for i in range(1, levels)]
    if duplicate:
        top = f"*a{levels - 1}"
        return "\n".join(lines) + f"\nengine:\n  max_rounds: {top}\n  max_rounds: {top}\nsenses: {{}}\n"
    return "\n".join(lines) + f"\nsenses: *a{levels - 1}\n"


def text_bomb(size: int = 20_000, levels: int = 4, fan: int = 10) -> str:
    """Few values, much text: a 20 KB string aliased `fan` times at each of `levels` levels (10,000 values,
    200 MB once expanded) under a key whose validation quotes its value."""
    lines = [f"defs:\n  - &t0 \"{'x' * size}\""]
    lines += [f"  - &t{i} [{', '.join([f'*t{i - 1}'] * fan)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + f"\nsenses:\n  a:\n    peers: *t{levels}\n"


@pytest.fixture
def instance(home: Path) -> Path:
    shutil.copytree(TEMPLATE, home)
    return home


def check_process(home: Path, timeout: float = 20.0) -> subprocess.CompletedProcess:
    """`nerve config check` as a real process, so a hang is a timeout and a traceback is visible."""
    return subprocess.run([sys.executable, "-m", "nerve_cli", "config", "check", "--home", str(home)],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("duplicate", [False, True], ids=["plain", "under-a-duplicate-key"])
def test_alias_bomb_is_refused_by_config_check_at_once(instance: Path, duplicate: bool) -> None:
    (instance / "nerve.yaml").write_text(alias_bomb(levels=10, fan=10, duplicate=duplicate))
    started = time.monotonic()
    result = check_process(instance)
    assert time.monotonic() - started < 10
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert "aliases" in result.stdout and "100,000 values" in result.stdout


def test_an_alias_bomb_of_text_is_refused_before_it_is_expanded(instance: Path) -> None:
    """10,000 values passed the values bound, and `config check` ran past 60 s at 1 GB: the bytes of text an
    expanded document may hold are bounded too."""
    (instance / "nerve.yaml").write_text(text_bomb())
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", "import resource, runpy, sys; sys.argv = ['nerve', 'config', "
                             f"'check', '--home', {str(instance)!r}]; "
                             "import atexit; atexit.register(lambda: print('maxrss', resource.getrusage("
                             "resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)); "
                             "runpy.run_module('nerve_cli', run_name='__main__')"],
                            capture_output=True, text=True, timeout=30)
    assert time.monotonic() - started < 10
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "KiB of text once YAML aliases" in result.stdout
    rss_mib = int(result.stderr.split("maxrss")[1].split()[0]) / 1024
    # 37-40 MiB alone; one full suite at load 4 read 201 MiB once, not explained (three runs alone and the file
    # under -n 2 stayed near 39): the bound is the one that catches the 1 GB this test was written for
    assert rss_mib < 400, f"config check took {rss_mib:.0f} MiB"


def test_alias_bomb_saved_while_the_engine_runs_is_rejected_and_the_engine_keeps_answering(home: Path) -> None:
    config = "senses:\n  tick: {}\nreflexes:\n  - {sense: tick, interval: 200ms}\n"
    write_instance(home, config, {"tick": "def compute(db, peers):\n    return 1\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        (home / "nerve.yaml").write_text(alias_bomb(levels=10, fan=10, duplicate=True))
        rejected = wait_for(lambda: read_logs(home, "system", "config_rejected"), 15, what="the rejection")
        assert "aliases" in " ".join(rejected[0]["payload"]["problems"])
        (home / "nerve.yaml").write_text(text_bomb())
        rejected = wait_for(lambda: read_logs(home, "system", "config_rejected")[1:], 15, what="the second one")
        assert "KiB of text" in " ".join(rejected[0]["payload"]["problems"])
        assert len(str(rejected[0]["payload"])) < 10_000  # one line, not 204 MB of the expanded text
        assert engine.status()["senses"]["tick"]["group"] == "default"  # the old config still runs
        (home / "nerve.yaml").write_text(config.replace("200ms", "300ms"))  # the next valid edit is applied
        wait_for(lambda: read_logs(home, "system", "config_reloaded"), 15, what="the next good save")
        code, output = engine.stop()
    assert code == 0, output


def test_config_tracebacks_non_utf8_bytes_name_the_line(instance: Path) -> None:
    path = instance / "nerve.yaml"
    path.write_bytes(path.read_bytes().replace(b"group: system", b"group: syst\xffem", 1))
    result = check_process(instance)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    line = path.read_bytes().split(b"\n").index(b"    group: syst\xffem") + 1
    assert f"nerve.yaml:{line}:" in result.stdout and "not UTF-8" in result.stdout and "0xff" in result.stdout


def test_config_tracebacks_a_control_character_in_a_file_that_is_not_ascii_is_one_problem(instance: Path) -> None:
    """ruamel looks for characters YAML forbids with a pattern of ours (config.source.printable_reader, quicker
    to compile than its own): the same answer for each of the 1,114,112 code points, and a bell in a file
    with non-ASCII text is refused as before while the scaffold's own non-ASCII text is fine."""
    import re

    from ruamel.yaml.reader import Reader

    from nerve_cli.config.source import printable_reader

    every = "".join(map(chr, range(0x110000)))
    ours = [m.start() for m in printable_reader().NON_PRINTABLE.finditer(every)]
    assert ours == [m.start() for m in re.compile(Reader.NON_PRINTABLE.pattern).finditer(every)]
    path = instance / "nerve.yaml"
    assert any(ord(c) > 127 for c in path.read_text())  # the scaffold's comments: the pattern's path is taken
    assert check_process(instance).returncode == 0
    path.write_text(path.read_text().replace("group: system", "group: sys\x07tem", 1))
    result = check_process(instance)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    line = path.read_text().splitlines().index("    group: sys\x07tem") + 1
    assert f"nerve.yaml:{line}:" in result.stdout and "U+0007 is not allowed" in result.stdout, result.stdout


@pytest.mark.parametrize("nested", ["[" * 3000 + "]" * 3000, "{a: " * 3000 + "1" + "}" * 3000,
                                    "\n" + "".join(" " * (i + 2) + "k:\n" for i in range(300))])
def test_config_tracebacks_deep_nesting_is_one_problem(instance: Path, nested: str) -> None:
    (instance / "nerve.yaml").write_text("engine:\n  max_rounds: " + nested + "\n")
    started = time.monotonic()
    result = check_process(instance)
    assert time.monotonic() - started < 10
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert "nested more than 32 levels deep" in result.stdout


@pytest.mark.parametrize("text", [
    "senses:\n  a: {group: [x, y]}\nreflexes:\n  - {sense: a, interval: 1s}\n",
    "senses:\n  a: {group: {x: 1}}\nreflexes:\n  - {sense: a, interval: 1s}\ngroups:\n  x: {memory_limit: 1MB}\n",
    "senses:\n  ? [a, b]\n  : {group: x}\n",
    "groups:\n  ? {a: 1}\n  : {memory_limit: 1MB}\n",
])
def test_config_tracebacks_a_list_or_mapping_where_a_name_belongs(instance: Path, text: str) -> None:
    (instance / "nerve.yaml").write_text(text)
    result = runner.invoke(app, ["config", "check"])
    assert isinstance(result.exception, SystemExit) and result.exit_code == 1, result.output
    assert any(w in result.output for w in ("expected a name", "is not allowed")), result.output


def test_config_tracebacks_a_file_far_too_large_is_refused_unread(instance: Path) -> None:
    (instance / "nerve.yaml").write_text("# " + "x" * (2 * 1024 * 1024) + "\n")
    result = runner.invoke(app, ["config", "check"])
    assert result.exit_code == 1 and "larger than 256 KiB" in result.output, result.output


def test_config_tracebacks_senses_all_listening_to_each_other_are_checked_at_once(instance: Path) -> None:
    names = [f"s{i}" for i in range(16)]  # each listening to all 15 others: trillions of simple loops
    text = "senses:\n" + "".join(f"  {n}: {{}}\n" for n in names) + "reflexes:\n" + "".join(
        f"  - {{sense: {n}, on: [{', '.join(m for m in names if m != n)}]}}\n" for n in names)
    (instance / "nerve.yaml").write_text(text)
    started = time.monotonic()
    result = check_process(instance)
    assert time.monotonic() - started < 10
    loops = [line for line in result.stdout.splitlines() if "in a loop" in line]
    assert len(loops) == 1 and "s0 → " in loops[0], result.stdout


def test_config_tracebacks_non_utf8_save_keeps_hot_reload_working(home: Path) -> None:
    config = "senses:\n  tick: {}\nreflexes:\n  - {sense: tick, interval: 1h}\n"
    write_instance(home, config, {"tick": "def compute(db, peers):\n    return 1\n"})
    with RunningEngine(home) as engine:
        engine.wait_ready()
        (home / "nerve.yaml").write_bytes(config.encode() + b"# caf\xe9\n")
        rejected = wait_for(lambda: read_logs(home, "system", "config_rejected"), 15, what="the rejection")
        assert "not UTF-8" in rejected[0]["payload"]["problems"][0]
        (home / "nerve.yaml").write_text(config.replace("1h", "2h"))
        reloaded = wait_for(lambda: read_logs(home, "system", "config_reloaded"), 15, what="the next good save")
        assert reloaded[0]["payload"]["changes"] == ["reflexes changed (1 → 1)", "reflexes[0].interval: 1h → 2h"]
        code, output = engine.stop()
    assert code == 0, output


def test_config_tracebacks_editing_commands_refuse_a_non_utf8_file_cleanly(instance: Path) -> None:
    path = instance / "nerve.yaml"
    path.write_bytes(path.read_bytes() + b"# \xff\n")
    result = runner.invoke(app, ["sense", "disable", "cpu-percent", "--dry-run"])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "not UTF-8" in result.output
