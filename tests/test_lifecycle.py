"""`nerve sense disable|enable` and `nerve workflow disable|enable`: the cascade, its marker, one edit, one commit."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import cli

from nerve_cli.config.lifecycle import plan_disable
from nerve_cli.config.load import load_config, validate
from nerve_cli.instance.git import commit, init_repo

# fetch → parse (on fetch) → report (on parse); audit reads fetch as a peer.
CHAIN = """\
# Chain instance: every comment in here must survive.
senses:
  fetch: {group: g1}      # the source
  parse: {group: g1}
  report:
    group: g2             # block style
  audit: {peers: [fetch]} # reads fetch
  inbox: {}

# reflexes below
reflexes:
  - {sense: fetch, interval: 10s}
  - sense: parse
    on: [fetch]           # parse listens to fetch
  - {sense: report, on: [parse]}
  - {sense: audit, interval: 1m}
  - {sense: inbox, on: [task.created]}
  # end of reflexes

workflows:
  cleanup: {concurrency: 1}   # tidy up
"""

CASCADE = [  # what `nerve sense disable fetch` turns off, and why
    ("reflexes[0] (fetch every 10s)", "triggers fetch"),
    ("reflexes[1] (parse on [fetch])", "listens to fetch"),
    ("sense audit", "reads fetch as a peer"),
    ("reflexes[3] (audit every 1m)", "triggers audit (via fetch → audit)"),
]



def make(home: Path, text: str = CHAIN) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    (home / "nerve.yaml").write_text(text)
    init_repo(home)
    commit(home, ["nerve.yaml"], "first")
    return home / "nerve.yaml"


def commits(home: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(home), "log", "--format=%s"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def changed_files(home: Path) -> list[str]:
    out = subprocess.run(["git", "-C", str(home), "show", "--name-only", "--format=", "HEAD"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()


def comments(text: str) -> list[str]:
    """Every comment of the user's, in order (markers taken out)."""
    lines = [re.sub(r"\s*# nerve: disabled with \S+", "", line) for line in text.splitlines()]
    return [line[line.index("#"):] for line in lines if "#" in line]


def states(home: Path) -> dict[str, bool]:
    config = load_config(home)
    out = {f"sense {n}": s.enabled for n, s in config.senses.items()}
    out.update({f"reflexes[{i}]": r.enabled for i, r in enumerate(config.reflexes)})
    out.update({f"workflow {n}": w.enabled for n, w in config.workflows.items()})
    return out


def test_the_plan_names_each_item_and_why(home: Path) -> None:
    make(home)
    plan = plan_disable(load_config(home), "fetch")
    assert [(i.what, i.why) for i in plan.items] == CASCADE
    assert plan.change_target


def test_the_cascade_recurses_through_peers_and_skips_what_is_already_off(home: Path) -> None:
    make(home, CHAIN.replace("  inbox: {}", "  inbox: {peers: [audit]}\n  spare: {peers: [fetch], enabled: false}"))
    plan = plan_disable(load_config(home), "fetch")
    whys = {i.what: i.why for i in plan.items}
    assert whys["sense inbox"] == "reads audit as a peer (via fetch → audit)"
    assert whys["reflexes[4] (inbox on [task.created])"] == "triggers inbox (via fetch → audit → inbox)"
    assert "sense spare" not in whys  # already off: left alone


def test_dry_run_prints_the_cascade_and_changes_nothing(home: Path) -> None:
    path = make(home)
    before = path.read_bytes()
    result = cli("sense", "disable", "fetch", "--dry-run")
    assert result.exit_code == 0, result.output
    for what, why in CASCADE:
        assert what in result.output and why in result.output
    assert "dry run" in result.output
    assert path.read_bytes() == before
    assert commits(home) == ["first"]


def test_disable_keeps_every_comment_marks_the_cascade_and_makes_one_commit(home: Path) -> None:
    path = make(home)
    result = cli("sense", "disable", "fetch")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert comments(text) == comments(CHAIN)
    assert validate(text).valid
    assert commits(home) == ["nerve: sense disable fetch (+4 by cascade)", "first"]
    assert changed_files(home) == ["nerve.yaml"]
    off = {k for k, on in states(home).items() if not on}
    assert off == {"sense fetch", "reflexes[0]", "reflexes[1]", "sense audit", "reflexes[3]"}
    marked = [line for line in text.splitlines() if "# nerve: disabled with fetch" in line]
    assert len(marked) == 4  # the cascade's items; fetch itself was asked for
    assert "  fetch: {group: g1, enabled: false}      # the source" in text.splitlines()


def test_enable_turns_on_the_sense_and_its_own_trigger_and_says_what_is_still_off(home: Path) -> None:
    make(home)
    cli("sense", "disable", "fetch")
    result = cli("sense", "enable", "fetch")
    assert result.exit_code == 0, result.output
    assert "reflexes[0] (fetch every 10s)" in result.output  # its own trigger: without it, it would never run
    assert "still off" in result.output
    for command in ("nerve sense enable parse --reflex 1", "nerve sense enable audit",
                    "nerve sense enable audit --reflex 3", "nerve sense enable fetch --cascade"):
        assert command in result.output
    off = {k for k, on in states(home).items() if not on}
    assert off == {"reflexes[1]", "sense audit", "reflexes[3]"}
    assert commits(home)[0] == "nerve: sense enable fetch (+1 restored)"


def test_enable_cascade_restores_exactly_what_the_disable_turned_off(home: Path) -> None:
    # reflexes[5] also depends on fetch but was off by hand: the cascade skips it, --cascade leaves it off
    path = make(home, CHAIN.replace("  # end of reflexes", "  - {sense: report, on: [fetch], enabled: false}\n"
                                                          "  # end of reflexes"))
    before = path.read_text()
    cli("sense", "disable", "fetch")
    cli("sense", "enable", "fetch")  # plain enable first: the markers must still be there
    result = cli("sense", "enable", "fetch", "--cascade")
    assert result.exit_code == 0, result.output
    assert "brought back" in result.output and "reflexes[3] (audit every 1m)" in result.output
    assert path.read_text() == before  # every cascade item back, the hand-disabled reflex still off
    assert commits(home)[:3] == ["nerve: sense enable fetch (+3 restored)", "nerve: sense enable fetch (+1 restored)",
                                 "nerve: sense disable fetch (+4 by cascade)"]


def test_cascade_keeps_off_what_another_disabled_sense_still_cuts_off(home: Path) -> None:
    make(home, CHAIN.replace("audit: {peers: [fetch]}", "audit: {peers: [fetch, inbox]}"))
    cli("sense", "disable", "fetch")  # audit off (reads fetch)
    assert cli("sense", "disable", "inbox").exit_code == 0  # audit already off: not re-marked
    result = cli("sense", "enable", "fetch", "--cascade")
    assert "sense audit stays off" in result.output and "nerve sense enable inbox --cascade" in result.output
    assert states(home)["sense audit"] is False and states(home)["reflexes[0]"] is True
    assert "# nerve: disabled with inbox" in next(
        line for line in (home / "nerve.yaml").read_text().splitlines() if line.strip().startswith("audit:"))
    cli("sense", "enable", "inbox", "--cascade")
    assert all(states(home).values())


def test_enable_reflex_option_brings_back_one_reflex(home: Path) -> None:
    make(home)
    cli("sense", "disable", "fetch")
    assert cli("sense", "enable", "fetch", "--reflex", "0").exit_code == 0
    assert states(home)["reflexes[0]"] and not states(home)["reflexes[1]"]
    wrong = cli("sense", "enable", "fetch", "--reflex", "1")
    assert wrong.exit_code == 1 and "nerve sense enable parse --reflex 1" in wrong.output


def test_already_disabled_or_enabled_says_so_without_a_commit(home: Path) -> None:
    make(home)
    first = cli("sense", "enable", "fetch")
    assert first.exit_code == 0 and "already enabled" in first.output
    cli("sense", "disable", "fetch")
    again = cli("sense", "disable", "fetch")
    assert again.exit_code == 0 and "already disabled" in again.output
    audit = cli("sense", "disable", "audit")
    assert audit.exit_code == 0 and "by the cascade of `nerve sense disable fetch`" in audit.output
    assert commits(home) == ["nerve: sense disable fetch (+4 by cascade)", "first"]


def test_unknown_names_get_the_nearest_name(home: Path) -> None:
    path = make(home)
    before = path.read_bytes()
    typo = cli("sense", "disable", "fetc")
    assert typo.exit_code == 1 and "no sense `fetc`" in typo.output and "did you mean `fetch`?" in typo.output
    wrong_kind = cli("sense", "disable", "cleanup")
    assert wrong_kind.exit_code == 1 and "is a workflow" in wrong_kind.output
    builtin = cli("sense", "disable", "nerve-health")
    assert builtin.exit_code == 1 and "built-in" in builtin.output
    workflow = cli("workflow", "disable", "cleanp")
    assert workflow.exit_code == 1 and "did you mean `cleanup`?" in workflow.output
    assert path.read_bytes() == before and commits(home) == ["first"]


def test_workflow_disable_and_enable_cascade_nowhere(home: Path) -> None:
    path = make(home)
    result = cli("workflow", "disable", "cleanup")
    assert result.exit_code == 0, result.output
    assert "refuses directives" in result.output
    assert {k for k, on in states(home).items() if not on} == {"workflow cleanup"}
    assert "  cleanup: {concurrency: 1, enabled: false}   # tidy up" in path.read_text().splitlines()
    again = cli("workflow", "disable", "cleanup")
    assert again.exit_code == 0 and "already disabled" in again.output
    assert cli("workflow", "enable", "cleanup").exit_code == 0
    assert path.read_text() == CHAIN
    assert commits(home) == ["nerve: workflow enable cleanup", "nerve: workflow disable cleanup", "first"]


def test_json_output_for_scripts(home: Path) -> None:
    make(home)
    data = json.loads(cli("sense", "disable", "fetch", "--dry-run", "--json").output)
    assert [(i["what"], i["why"]) for i in data["items"]] == CASCADE
    assert data["dry_run"] is True and data["written"] is False and data["commit"] is None


@pytest.mark.parametrize("args", [("sense", "disable", "fetch"), ("workflow", "disable", "cleanup")])
def test_without_git_the_edit_still_happens(home: Path, args: tuple[str, ...]) -> None:
    home.mkdir(parents=True)
    (home / "nerve.yaml").write_text(CHAIN)
    result = cli(*args)
    assert result.exit_code == 0, result.output
    assert "committed" not in result.output and "enabled: false" in (home / "nerve.yaml").read_text()


def test_workflow_disable_names_the_senses_seen_launching_it(home: Path) -> None:
    from nerve_cli.store.logs import LogStore

    make(home)
    with LogStore(home / "data" / "logs.db") as logs:  # the row the kernel writes for a sense's directive
        logs.workflow_event(logs.allocate_run_id(), "cleanup", "queued", {
            "workflow": "cleanup", "prompt": "p", "max_rounds": 5, "origin": {"kind": "directive", "sense": "report"}})
        logs.flush()
    result = cli("workflow", "disable", "cleanup")
    assert result.exit_code == 0 and "senses seen launching it: report" in result.output
