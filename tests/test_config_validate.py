"""nerve.yaml validation: every rule with a failing example, key paths, line numbers, all at once."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nerve_cli.config.load import load_config, validate, validate_text
from nerve_cli.errors import ConfigError, InstanceNotFound

TEMPLATE = Path(__file__).resolve().parents[1] / "templates" / "instance" / "nerve.yaml"

BASE = """\
senses:
  cpu-percent: {group: system, throttle: 5s}
  disk-usage: {group: system}
reflexes:
  - sense: cpu-percent
    interval: 10s
"""


def check(text: str):
    return validate(textwrap.dedent(text))


def errors(text: str) -> list:
    return [p for p in check(text).problems if p.severity == "error"]


def only_error(text: str):
    found = errors(text)
    assert len(found) == 1, [str(p) for p in found]
    return found[0]


def test_template_is_valid_with_system_group_and_intervals() -> None:
    config, problems = validate_text(TEMPLATE.read_text(), TEMPLATE)
    assert problems == []
    assert config is not None
    assert set(config.senses) == {"cpu-percent", "memory-usage", "disk-usage"}
    assert {s.group for s in config.senses.values()} == {"system"}
    assert {r.sense: r.interval for r in config.reflexes} == {"cpu-percent": 10, "memory-usage": 15, "disk-usage": 60}


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "senses:\nreflexes:\nworkflows:\n"])
def test_empty_file_or_empty_sections_are_a_valid_empty_config(text: str) -> None:
    config, problems = validate_text(text)
    assert problems == [] and config is not None
    assert config.senses == {} and config.reflexes == ()


def test_a_sense_with_no_settings_gets_the_defaults() -> None:
    config, problems = validate_text("senses:\n  cpu-percent:\n")
    assert problems == []
    assert config.senses["cpu-percent"].group == "default"


def test_top_level_must_be_a_mapping() -> None:
    problem = only_error("- sense: cpu-percent\n")
    assert problem.line == 1 and "top level must be a mapping" in problem.message


def test_yaml_syntax_error_shows_line_and_column() -> None:
    problem = only_error("senses:\n  cpu-percent: {group: system\nreflexes: []\n")
    assert problem.line is not None and problem.column is not None
    assert str(problem).startswith(f"nerve.yaml:{problem.line}:{problem.column}: ")
    assert "YAML syntax error" in problem.message


def test_mapping_value_syntax_error_points_at_the_column() -> None:
    problem = only_error("senses:\n  cpu: a: b\n")
    assert (problem.line, problem.column) == (2, 9)


def test_duplicate_key_is_an_error_with_its_line() -> None:
    problem = only_error("senses:\n  cpu-percent: {}\n  cpu-percent: {}\n")
    assert problem.line == 3 and "duplicate key `cpu-percent`" in problem.message


def test_bad_duration_renders_like_a_compiler() -> None:
    problem = only_error("senses:\n  cpu-percent:\n    throttle: 5\n")
    assert str(problem) == (
        "nerve.yaml:3: senses.cpu-percent.throttle: expected a duration like 500ms, 90s, 10m, 1h30m, 2d or 1w, got 5"
    )


@pytest.mark.parametrize("value, seconds", [("500ms", 0.5), ("5s", 5), ("10m", 600), ("2h", 7200), ("1d", 86400),
                                            ("1w", 604800), ("1h30m", 5400), ("1.5h", 5400), ("2d12h", 216000)])
def test_every_duration_unit_parses(value: str, seconds: float) -> None:
    config, problems = validate_text(f"senses:\n  a: {{throttle: {value}}}\n")
    assert problems == [] and config.senses["a"].throttle == seconds


@pytest.mark.parametrize("value", ["5", "5 s", "5sec", "-1s", "1h 30m", "''"])
def test_bad_durations_are_refused(value: str) -> None:
    assert only_error(f"senses:\n  a: {{timeout: {value}}}\n").path == "senses.a.timeout"


@pytest.mark.parametrize("value", ["30m1h", "1h1h"])
def test_a_duration_writes_each_unit_once_largest_first(value: str) -> None:
    problem = only_error(f"senses:\n  a: {{timeout: {value}}}\n")
    assert "write each unit once, largest first (like 1h30m)" in problem.message


@pytest.mark.parametrize("name", ["CPU", "cpu usage", "-cpu", "_cpu", "a" * 65, "cpu/../x"])
def test_bad_sense_names_are_refused(name: str) -> None:
    problem = only_error(f"senses:\n  '{name}': {{}}\n")
    assert problem.path == f"senses.{name}" and problem.line == 2


def test_bad_group_workflow_and_peer_names_are_refused() -> None:
    found = errors("""\
        senses:
          a: {group: My Group, peers: [Bad]}
        workflows:
          Clean Up: {}
        """)
    assert {p.path for p in found} == {"senses.a.group", "senses.a.peers[0]", "workflows.Clean Up"}


def test_a_name_of_64_characters_is_fine() -> None:
    assert validate_text(f"senses:\n  {'a' * 64}: {{}}\n")[1] == []


def test_unknown_key_suggests_the_nearest_valid_key() -> None:
    problem = only_error("senses:\n  cpu-percent: {thottle: 5s}\n")
    assert problem.path == "senses.cpu-percent.thottle"
    assert "did you mean `throttle`?" in problem.message


def test_unknown_top_level_key_suggests_the_section() -> None:
    problem = only_error("sense:\n  cpu-percent: {}\n")
    assert "did you mean `senses`?" in problem.message and problem.line == 1


def test_unknown_key_without_a_close_match_lists_the_valid_keys() -> None:
    problem = only_error("workflows:\n  w: {colour: red}\n")
    assert "valid keys here: concurrency, overflow, max_queue" in problem.message


def test_key_of_another_section_says_where_it_belongs() -> None:
    message = only_error("senses:\n  a: {interval: 10s}\n").message
    assert "`interval` is a reflex key" in message


def test_workflow_kind_reflex_gets_one_error_explaining_how_a_sense_launches_workflows() -> None:
    text = BASE + "  - workflow: cleanup\n    on: [disk-usage]\n"
    found = check(text).problems
    assert len(found) == 1, [str(p) for p in found]
    problem = found[0]
    assert problem.path == "reflexes[1].workflow" and problem.line == 7
    assert "only schedule senses" in problem.message and "SenseResult" in problem.message
    assert 'workflow="cleanup|' in problem.message and "name|maxRounds|prompt" in problem.message


def test_reflex_must_name_a_sense_with_a_hint() -> None:
    problem = only_error(BASE + "  - sense: cpu-percnt\n    interval: 1m\n")
    assert problem.path == "reflexes[1].sense" and problem.line == 7
    assert "did you mean `cpu-percent`?" in problem.message


def test_reflex_without_sense_is_an_error() -> None:
    problem = only_error(BASE + "  - interval: 1m\n")
    assert problem.path == "reflexes[1].sense" and "missing required key `sense`" in problem.message


def test_peers_must_exist_and_not_be_itself() -> None:
    found = errors("""\
        senses:
          cpu-percent: {}
          report: {peers: [cpu-percnt, report]}
        """)
    messages = {p.path: p.message for p in found}
    assert "did you mean `cpu-percent`?" in messages["senses.report.peers[0]"]
    assert "lists itself as a peer" in messages["senses.report.peers[1]"]
    assert {p.line for p in found} == {3}


@pytest.mark.parametrize("reflex", ["  - sense: disk-usage\n", "  - sense: disk-usage\n    on: []\n"])
def test_reflex_that_can_never_fire_is_an_error(reflex: str) -> None:
    problem = only_error(BASE + reflex)
    assert problem.path == "reflexes[1]" and problem.line == 7
    assert "no `interval`, `on`, `cron` or `paths`" in problem.message


def test_a_cron_reflex_fires_without_interval_or_on() -> None:
    assert errors(BASE + "  - sense: disk-usage\n    cron: '0 9 * * *'\n") == []


def test_unused_group_settings_are_a_warning_with_a_hint() -> None:
    result = check("groups:\n  sytem: {memory_limit: 300MB}\n" + BASE)
    assert result.valid
    (problem,) = result.problems
    assert problem.path == "groups.sytem" and problem.severity == "warning" and problem.line == 2
    assert "did you mean group `system`?" in problem.message


def test_unknown_group_setting_suggests_the_nearest() -> None:
    problem = only_error("groups:\n  system: {memory_limt: 300MB}\n" + BASE)
    assert problem.path == "groups.system.memory_limt" and "did you mean `memory_limit`?" in problem.message


def test_second_never_firing_reflex_is_reported_too() -> None:
    found = errors(BASE + "  - sense: disk-usage\n  - sense: cpu-percent\n    enabled: false\n")
    assert [p.path for p in found] == ["reflexes[1]", "reflexes[2]"]


def test_zero_interval_is_an_error() -> None:
    assert only_error(BASE + "  - sense: disk-usage\n    interval: 0s\n").path == "reflexes[1].interval"


def test_external_channels_are_listed_not_errors() -> None:
    result = check(BASE + "  - sense: disk-usage\n    on: [task.created, cpu-percent, task.created]\n")
    assert result.valid and result.config is not None and result.problems == []
    assert [c.name for c in result.channels] == ["task.created"]
    assert result.channels[0].did_you_mean is None


def test_channel_close_to_a_sense_name_is_a_warning_with_a_hint() -> None:
    result = check(BASE + "  - sense: disk-usage\n    on: [cpu-percnt]\n")
    assert result.valid and result.config is not None
    (problem,) = result.problems
    assert problem.severity == "warning" and problem.path == "reflexes[1].on[0]" and problem.line == 8
    assert "did you mean sense `cpu-percent`?" in problem.message
    assert result.channels[0].name == "cpu-percnt" and result.channels[0].did_you_mean == "cpu-percent"


def test_nerve_health_may_be_listened_to_but_not_defined_or_scheduled() -> None:
    result = check(BASE + "  - sense: disk-usage\n    on: [nerve-health]\n")
    assert result.problems == [] and result.channels == []
    defined = only_error("senses:\n  nerve-health: {}\n")
    assert defined.path == "senses.nerve-health" and "built-in" in defined.message
    scheduled = only_error(BASE + "  - sense: nerve-health\n    interval: 1m\n")
    assert "built in" in scheduled.message


@pytest.mark.parametrize("word", ["yes", "no", "off", "on", "1", "'true'"])
def test_booleans_must_be_real_true_or_false(word: str) -> None:
    problem = only_error(f"senses:\n  a: {{enabled: {word}}}\n")
    assert problem.path == "senses.a.enabled" and "expected true or false" in problem.message


def test_yaml_1_2_off_is_a_string_not_false() -> None:
    # In YAML 1.1 (PyYAML) `off` silently becomes False; here it is a visible mistake.
    assert "YAML 1.2" in only_error("workflows:\n  w: {idempotent: off}\n").message


def test_integers_are_strict() -> None:
    found = errors('workflows:\n  w: {concurrency: "3", max_queue: 0, overflow: dropp, role_retries: 9}\n')
    messages = {p.path: p.message for p in found}
    assert messages["workflows.w.concurrency"] == "expected a whole number, got '3'"
    assert "≥ 1" in messages["workflows.w.max_queue"]
    assert "'drop' or 'queue'" in messages["workflows.w.overflow"]
    assert messages["workflows.w.role_retries"] == "expected a number ≤ 5, got 9"


def test_every_problem_is_reported_at_once_in_line_order() -> None:
    text = """\
        engine:
          max_rounds: 0
        senses:
          cpu-percent: {throttle: fast}
          Disk: {}
        reflexes:
          - sense: memory
            interval: 1m
          - workflow: cleanup
        workflows:
          w: {overflow: maybe}
        """
    found = errors(text)
    assert [(p.line, p.path) for p in found] == [
        (2, "engine.max_rounds"),
        (4, "senses.cpu-percent.throttle"),
        (5, "senses.Disk"),
        (7, "reflexes[0].sense"),
        (9, "reflexes[1].workflow"),
        (11, "workflows.w.overflow"),
    ]
    assert check(text).config is None


def test_self_trigger_and_loops_are_warnings() -> None:
    result = check("""\
        senses:
          a: {}
          b: {}
        reflexes:
          - sense: a
            on: [a, b]
          - sense: b
            on: [a]
        """)
    assert result.valid
    messages = [p.message for p in result.problems]
    assert any("listens to its own signals" in m for m in messages)
    assert any("a → b → a" in m for m in messages)


def test_disabled_targets_are_warnings_not_errors() -> None:
    result = check("""\
        senses:
          a: {enabled: false}
          b: {peers: [a]}
        reflexes:
          - sense: a
            interval: 1m
        """)
    assert result.valid and {p.severity for p in result.problems} == {"warning"}
    assert {p.path for p in result.problems} == {"senses.b.peers[0]", "reflexes[0].sense"}


def test_wrong_section_shapes() -> None:
    found = errors("senses: [a, b]\nreflexes: {a: 1}\n")
    assert [p.path for p in found] == ["senses", "reflexes"]
    assert "list of reflexes" in found[1].message


def test_load_config_raises_with_every_problem(home: Path) -> None:
    home.mkdir()
    (home / "nerve.yaml").write_text("senses:\n  a: {throttle: 1}\n  b: {timeout: 2}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(home)
    assert "nerve.yaml" in str(caught.value) and "2 errors" in str(caught.value)
    assert [p.line for p in caught.value.problems] == [2, 3]


def test_load_config_returns_the_model(home: Path) -> None:
    home.mkdir()
    (home / "nerve.yaml").write_text(TEMPLATE.read_text())
    assert load_config(home).senses["disk-usage"].throttle == 30


def test_load_config_without_a_file_says_how_to_create_one(home: Path) -> None:
    with pytest.raises(InstanceNotFound, match="nerve init --home"):
        load_config(home)


@pytest.mark.parametrize("value", ["1h30m", "1w"])
def test_a_reflex_interval_takes_the_since_grammar(value: str) -> None:
    config, problems = validate_text(f"senses:\n  a: {{}}\nreflexes:\n  - {{sense: a, interval: {value}}}\n")
    assert problems == [] and config.reflexes[0].interval == {"1h30m": 5400, "1w": 604800}[value]
