"""`nerve logs`: table, --json lines, filters, --since into the archive, --follow across processes."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from archive_data import day_ms, make_logs
from conftest import nerve
from typer.testing import CliRunner

from nerve_cli.cli.app import app
from nerve_cli.home import Layout
from nerve_cli.store.archive import archive
from nerve_cli.store.logs import LogStore


@pytest.fixture
def instance(home: Path) -> Layout:
    home.mkdir(parents=True)
    (home / "nerve.yaml").write_text("")
    return Layout(home)



def test_no_log_yet_says_so(instance: Layout) -> None:
    result = CliRunner().invoke(app, ["logs"])
    assert result.exit_code == 0
    assert "No log yet" in result.output and "nerve run" in result.output


def test_table_newest_last_with_payload_summary(instance: Layout) -> None:
    store = LogStore(instance.logs_db)
    store.append("reflex", "run_complete", "cpu", {"outcome": "error", "duration_ms": 12})
    store.append("system", "error", "cpu", {"message": "boom in compute", "traceback": "Traceback…" * 50})
    store.close()
    result = CliRunner().invoke(app, ["logs", "--format", "table"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    first = next(i for i, l in enumerate(lines) if "run_complete" in l)
    second = next(i for i, l in enumerate(lines) if "boom in compute" in l)
    assert first < second
    assert "outcome=error" in lines[first] and "Traceback" not in result.output


def _untsv(cell: str) -> str:
    """Undo the TSV escapes: \\t \\n \\r \\\\."""
    return re.sub(r"\\(.)", lambda m: {"t": "\t", "n": "\n", "r": "\r"}.get(m.group(1), m.group(1)), cell)


def test_piped_rows_are_tab_separated_with_a_header_and_whole_payloads(instance: Layout) -> None:
    store = LogStore(instance.logs_db)
    store.append("reflex", "run_complete", "cpu", {"outcome": "ok", "note": "tab\there"})
    store.append("system", "error", None, {"message": "line one\nline two"})
    store.close()
    result = CliRunner().invoke(app, ["logs", "--utc"])  # CliRunner's stdout is not a terminal
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "time\tsource\ttype\tref\tpayload" and len(lines) == 3
    cells = lines[1].split("\t")
    assert cells[0].endswith("Z") and "T" in cells[0] and cells[1:4] == ["reflex", "run_complete", "cpu"]  # RFC 3339
    assert json.loads(_untsv(cells[4])) == {"outcome": "ok", "note": "tab\there"}
    assert json.loads(_untsv(lines[2].split("\t")[4])) == {"message": "line one\nline two"}
    assert "┃" not in result.stdout and "│" not in result.stdout
    as_csv = CliRunner().invoke(app, ["logs", "--format", "csv"]).stdout.splitlines()
    assert as_csv[0] == "time,source,type,ref,payload" and '"{""outcome"":""ok""' in as_csv[1]


def test_json_lines_parse_and_filter(instance: Layout) -> None:
    store = LogStore(instance.logs_db)
    for i in range(30):
        store.append("reflex" if i % 2 else "system", "t", f"s{i % 3}", {"i": i})
    store.close()
    result = CliRunner().invoke(app, ["logs", "--json", "--source", "reflex", "-n", "5"])
    assert result.exit_code == 0
    rows = [json.loads(line) for line in result.output.splitlines()]
    assert [r["payload"]["i"] for r in rows] == [21, 23, 25, 27, 29]
    assert set(rows[0]) == {"version", "id", "signal_id", "source", "type", "ref_id", "payload", "time_ms", "time"}
    result = CliRunner().invoke(app, ["logs", "--json", "--ref", "s0", "--type", "t", "--limit", "100"])
    assert len(result.output.splitlines()) == 10


def test_since_reads_archived_days_and_says_so(instance: Layout) -> None:
    first = 20_000  # 2024-10-04
    make_logs(instance, first, 10, 12)
    assert archive(instance.home, older_than_s=3 * 86400, now_ms=day_ms(first + 10) + 1).ok
    hot_only = nerve("logs", "--json", "-n", "1000", home=instance.home)
    assert len(hot_only.stdout.splitlines()) == 36 and "archived" not in hot_only.stderr

    result = nerve("logs", "--since", "2024-10-05", "--utc", "--json", "-n", "1000", home=instance.home)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 9 * 12
    assert [r["id"] for r in rows] == sorted(r["id"] for r in rows)
    assert rows[0]["time"].startswith("2024-10-05")
    assert "including archived days 2024-10-05 … 2024-10-10 from data/archive/logs" in result.stderr

    newest_two = nerve("logs", "--since", "3000d", "--json", "-n", "2", "--source", "signal", home=instance.home)
    assert [json.loads(l)["type"] for l in newest_two.stdout.splitlines()] == ["emit", "emit"]
    assert "including archived days 2024-10-04" in newest_two.stderr

    bad = nerve("logs", "--since", "yesterday", home=instance.home)
    assert bad.returncode == 2 and "Invalid value for --since: 'yesterday' is not a time" in bad.stderr


def test_follow_sees_a_row_appended_by_another_process(instance: Layout) -> None:
    store = LogStore(instance.logs_db)
    store.append("system", "before", None, {"n": -1})
    store.close()
    env = {**os.environ, "NERVE_HOME": str(instance.home)}
    proc = subprocess.Popen([sys.executable, "-m", "nerve_cli", "logs", "--follow", "--json"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout], daemon=True).start()
    try:
        # the history comes first: once it is printed, the follower is polling
        assert json.loads(lines.get(timeout=20))["type"] == "before"
        code = ("import sys; from pathlib import Path; from nerve_cli.store.logs import LogStore; "
                "s = LogStore(Path(sys.argv[1])); s.append('system', 'hello', None, {'n': 1}); s.close()")
        subprocess.run([sys.executable, "-c", code, str(instance.logs_db)], check=True, timeout=20)
        seen = json.loads(lines.get(timeout=10))
        assert seen["type"] == "hello" and seen["payload"] == {"n": 1}
        assert proc.poll() is None  # still following
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_type_print_finds_the_rows_the_table_shows_as_print(instance: Layout) -> None:
    store = LogStore(instance.logs_db)
    store.append("reflex", "output", "cpu", {"compute_id": 4, "lines": [{"stream": "stdout", "text": "hello"}]})
    store.append("reflex", "run_complete", "cpu", {"outcome": "signal"})
    store.close()
    shown = CliRunner().invoke(app, ["logs", "--utc"]).stdout.splitlines()[1].split("\t")
    assert shown[2:] == ["print", "cpu", '"#4 hello"']
    for type_ in ("print", "output"):
        rows = CliRunner().invoke(app, ["logs", "--type", type_, "--utc"]).stdout.splitlines()
        assert len(rows) == 2 and rows[1].split("\t")[2:] == ["print", "cpu", '"#4 hello"'], type_
    both = CliRunner().invoke(app, ["logs", "--type", "print", "--prints", "--json"])
    assert both.exit_code == 0 and json.loads(both.stdout)["type"] == "output"


def test_a_time_before_1970_is_a_usage_error_not_a_traceback(instance: Layout) -> None:
    """`nerve logs --since 99999999999d` and MCP's query_logs raised ValueError (a day before year 1)."""
    from nerve_cli.mcp.tools import BadArgument, Tools

    store = LogStore(instance.logs_db)
    store.append("system", "tick", None, {"n": 1})
    store.close()
    for args in (["--since", "99999999999d"], ["--until", "99999999999d"], ["--since", "9" * 40 + "d"]):
        result = CliRunner().invoke(app, ["logs", *args])
        assert result.exit_code == 2 and result.exception is None or isinstance(result.exception, SystemExit), args
        assert "before 1970-01-01" in result.output, (args, result.output)
    with pytest.raises(BadArgument, match="before 1970"):
        Tools(instance.home).query_logs(since="99999999999d")
