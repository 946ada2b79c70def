"""deploy/: the Prometheus alert rules pass `promtool test rules`, and the Grafana dashboard asks for real families.

promtool comes from Debian's `prometheus` package, installed by `make tools` when missing.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import yaml
from promkit import documented_families
from promkit import promtool as promtool_path

ROOT = Path(__file__).resolve().parents[1]
RULES = ROOT / "deploy" / "prometheus" / "nerve-alerts.yml"
RULE_TESTS = ROOT / "deploy" / "prometheus" / "nerve-alerts.test.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "nerve-dashboard.json"
# Prometheus' own series, and what functions and keywords look like in PromQL (not metric names)
NOT_NERVE = {"up"}
PROMQL_WORDS = {"sum", "by", "rate", "increase", "time", "max", "histogram_quantile", "clamp_min", "and", "on", "le",
                "humanizeDuration", "humanizePercentage"}


def promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([promtool_path(), *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def metric_names(expr: str) -> set[str]:
    """The series an expression reads: identifiers that are neither functions, keywords nor label names."""
    bare = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    bare = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", bare)  # grouping labels
    bare = re.sub(r"\[[^\]]*\]", "", bare)  # ranges
    return {word for word in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", bare)
            if word not in PROMQL_WORDS and not re.fullmatch(r"\d+[smhd]?", word)}


def family_of(series: str) -> str:
    """`nerve_computes_total` → `nerve_computes`, `nerve_x_bucket` → `nerve_x` (the histogram's family);
    the kernel process's own `nerve_kernel_process_*` (the metrics reference's row) → that prefix."""
    if series.startswith("nerve_kernel_process_"):
        return "nerve_kernel_process_*"
    return re.sub(r"_(total|bucket|count|sum)$", "", series)


def known_families() -> set[str]:
    # metric families another part of Nerve adds alongside (listener backlogs, staleness): agreed names
    agreed = {"nerve_sense_stale", "nerve_listener_backlog_events", "nerve_listener_backlog_oldest_age_seconds"}
    return documented_families() | agreed | NOT_NERVE | {"nerve_kernel_process_*"}


def test_the_alert_rules_lint_and_pass_their_unit_tests() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", RULE_TESTS.name, cwd=RULE_TESTS.parent)
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    cases = {t["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for t in case.get("alert_rule_test", [])}
    alerts = {r["alert"] for r in rules}
    assert {"NerveEngineDown", "NerveSenseStale", "NerveComputeErrorRate", "NerveThreadWaitingTooLong"} <= alerts
    assert alerts == cases, f"alerts without a promtool case: {alerts - cases}"
    for rule in rules:
        unknown = {family_of(s) for s in metric_names(rule["expr"])} - known_families()
        assert not unknown, f"{rule['alert']} reads series no one exports: {unknown}"


def test_the_dashboard_queries_are_valid_promql_over_exported_families(tmp_path: Path) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] == "nerve-engine" and dashboard["title"] == "Nerve"
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "job", "instance"}
    targets = [(p["title"], t["expr"]) for p in dashboard["panels"] for t in p.get("targets", [])]
    assert len(targets) >= 25
    recording = []
    for i, (title, expr) in enumerate(targets):
        concrete = expr.replace("$__rate_interval", "5m").replace("$job", ".*").replace("$instance", ".*")
        recording.append({"record": f"nerve:panel_{i}", "expr": concrete})
        unknown = {family_of(s) for s in metric_names(concrete)} - known_families()
        assert not unknown, f"panel {title!r} reads series no one exports: {unknown}"
    rules = tmp_path / "panels.yml"
    rules.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": recording}]}))
    checked = promtool("check", "rules", str(rules))  # parses every query as Prometheus would
    assert checked.returncode == 0, checked.stdout + checked.stderr
    shown = {family_of(s) for _, expr in targets for s in metric_names(expr)}
    for family in ("nerve_sense_last_signal_timestamp_seconds", "nerve_events", "nerve_model_tokens",
                   "nerve_thread_duration_seconds", "nerve_compute_duration_seconds", "nerve_build_info",
                   "nerve_webhook_requests", "nerve_fleet_connected", "nerve_fleet_outbox_events",
                   "nerve_fleet_received", "nerve_fleet_subscription_lag"):
        assert family in shown, f"the dashboard shows nothing of {family}"
