"""deploy/: the nats-server configuration runs as written, and a host authenticates with credentials from its
environment; the collector and compose files hang together."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from enginekit import RunningEngine, read_logs, wait_for, write_instance
from fleetkit import NatsServer, nats_server_binary

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def test_the_nats_server_configuration_is_valid() -> None:
    out = subprocess.run([nats_server_binary(), "-t", "-c", str(DEPLOY / "nats-server.conf")], capture_output=True,
                         text=True, timeout=30, env={"NERVE_NATS_PASSWORD": "x", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and "is valid" in out.stdout + out.stderr, out.stdout + out.stderr


def test_a_host_joins_with_the_deploy_configuration_and_credentials_from_its_environment(tmp_path: Path) -> None:
    text = (DEPLOY / "nats-server.conf").read_text()
    for line in ("listen: 0.0.0.0:4222\n", "http: 127.0.0.1:8222", "store_dir: /var/lib/nats"):
        assert line in text
        text = text.replace(line, "# " + line)  # the port, monitoring and store are the test's own
    config = tmp_path / "nats-server.conf"
    config.write_text(text)
    home = write_instance(tmp_path / "h", """
        senses:
          tick: {}
        reflexes:
          - {sense: tick, interval: 1h}
        fleet:
          servers: [URL]
          host: h
          publish: {senses: [tick]}
    """, {"tick": "def compute(db, peers):\n    return 1\n"})
    with NatsServer(tmp_path / "nats", config, env={"NERVE_NATS_PASSWORD": "s3cret"}) as server:
        yaml_text = (home / "nerve.yaml").read_text().replace("URL", server.url)
        (home / "nerve.yaml").write_text(yaml_text)
        with RunningEngine(home, env={"NATS_USER": "nerve", "NATS_PASSWORD": "wrong"}) as engine:
            engine.wait_ready()
            # under load an attempt may time out before the server answers it; a later one meets the refusal
            status = wait_for(lambda: "Authorization" in ((f := engine.status()["fleet"])["last_error"] or "") and f,
                              20, what="the refused login to show in status")
            assert not status["connected"]
            engine.stop()
        with RunningEngine(home, env={"NATS_USER": "nerve", "NATS_PASSWORD": "s3cret"}) as engine:
            engine.wait_ready()
            wait_for(lambda: engine.status()["fleet"]["connected"], 20, what="the host to connect")
            engine.stop()
    assert [r["type"] for r in read_logs(home, "system") if r["type"].startswith("fleet_")][-1] == "fleet_connected"


def test_the_collector_pipeline_names_what_it_defines_and_compose_mounts_existing_files() -> None:
    collector = yaml.safe_load((DEPLOY / "otel-collector.yaml").read_text())
    traces = collector["service"]["pipelines"]["traces"]
    for part in ("receivers", "processors", "exporters"):
        assert set(traces[part]) <= set(collector[part]), part
    assert collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"].endswith(":4318")
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    for service in compose["services"].values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DEPLOY / source).is_file(), volume
