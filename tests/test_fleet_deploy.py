"""deploy/: the nats-server configuration runs as written, and a host authenticates with credentials from its
environment; the collector and compose files hang together."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from enginekit import RunningEngine, read_logs, wait_for, write_instance, write_sense
from fleetkit import NatsServer, nats_server_binary

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
PASSWORDS = {"NERVE_NATS_PASSWORD_ALPHA": "alpha-s3cret", "NERVE_NATS_PASSWORD_BETA": "beta-s3cret"}


def deploy_config(tmp_path: Path) -> Path:
    """deploy/nats-server.conf as written, but for the port, monitoring and store, which are the test's own."""
    text = (DEPLOY / "nats-server.conf").read_text()
    for line in ("listen: 0.0.0.0:4222\n", "http: 127.0.0.1:8222", "store_dir: /var/lib/nats"):
        assert line in text
        text = text.replace(line, "# " + line)
    config = tmp_path / "nats-server.conf"
    config.write_text(text)
    return config


def test_the_nats_server_configuration_is_valid() -> None:
    out = subprocess.run([nats_server_binary(), "-t", "-c", str(DEPLOY / "nats-server.conf")], capture_output=True,
                         text=True, timeout=30, env={**PASSWORDS, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0 and "is valid" in out.stdout + out.stderr, out.stdout + out.stderr


def test_a_host_joins_with_the_deploy_configuration_and_credentials_from_its_environment(tmp_path: Path) -> None:
    config = deploy_config(tmp_path)
    home = write_instance(tmp_path / "h", """
        senses:
          tick: {}
        reflexes:
          - {sense: tick, interval: 1h}
        fleet:
          servers: [URL]
          host: alpha
          publish: {senses: [tick]}
    """, {"tick": "def compute(db, peers):\n    return 1\n"})
    with NatsServer(tmp_path / "nats", config, env=PASSWORDS) as server:
        yaml_text = (home / "nerve.yaml").read_text().replace("URL", server.url)
        (home / "nerve.yaml").write_text(yaml_text)
        with RunningEngine(home, env={"NATS_USER": "alpha", "NATS_PASSWORD": "wrong"}) as engine:
            engine.wait_ready()
            # under load an attempt may time out before the server answers it; a later one meets the refusal
            status = wait_for(lambda: "Authorization" in ((f := engine.status()["fleet"])["last_error"] or "") and f,
                              20, what="the refused login to show in status")
            assert not status["connected"]
            engine.stop()
        with RunningEngine(home, env={"NATS_USER": "alpha", "NATS_PASSWORD": "alpha-s3cret"}) as engine:
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


def test_a_host_cannot_publish_as_another_and_a_forged_header_is_refused(tmp_path: Path) -> None:
    """With one user shared by every host, a publisher forged `nerve.sense.alpha.src` with `Nerve-Host: alpha`
    and 5,000 plain publishes as host "evil" were stored and delivered. With a user per host (the deploy
    configuration), the server refuses a publish under another host's name, and the receiver refuses a
    message whose Nerve-Host header names another host than its subject."""
    import asyncio

    import nats
    from eventkit import STORE_SCHEMA, got, store_sense

    from nerve_cli.schema.migrate import generate_migration

    config = deploy_config(tmp_path)
    home = write_instance(tmp_path / "alpha", """
        senses:
          store: {}
        reflexes:
          - {sense: store, on: [beta/tick, deploys]}
        fleet:
          servers: [URL]
          host: alpha
          subscribe: {senses: [beta/tick], channels: [deploys]}
    """, {})
    write_sense(home, "store", store_sense(), STORE_SCHEMA)
    generate_migration(home / "senses" / "store")
    with NatsServer(tmp_path / "nats", config, env=PASSWORDS) as server:
        (home / "nerve.yaml").write_text((home / "nerve.yaml").read_text().replace("URL", server.url))
        with RunningEngine(home, env={"NATS_USER": "alpha", "NATS_PASSWORD": "alpha-s3cret"}) as engine:
            engine.wait_ready()
            wait_for(lambda: engine.status()["fleet"]["connected"], 20, what="alpha to connect")
            refused: list[str] = []

            async def as_beta() -> None:
                async def on_error(exc: Exception) -> None:
                    refused.append(str(exc))

                nc = await nats.connect(server.url, user="beta", password="beta-s3cret", error_cb=on_error)
                js = nc.jetstream(timeout=5)
                await js.publish("nerve.sense.beta.tick", b'{"n": 1}', headers={"Nerve-Host": "beta"})  # its own
                await js.publish("nerve.channel.beta.deploys", b'{"d": 1}', headers={"Nerve-Host": "beta"})
                await js.publish("nerve.channel.beta.deploys", b'{"d": 2}', headers={"Nerve-Host": "gamma"})
                for subject in ("nerve.sense.alpha.tick", "nerve.channel.alpha.deploys", "nerve.channel.evil.deploys"):
                    await nc.publish(subject, b'{"forged": true}', headers={"Nerve-Host": subject.split(".")[2]})
                await nc.flush()
                for _ in range(200):  # the server's refusals come back asynchronously
                    if len(refused) >= 3:
                        break
                    await asyncio.sleep(0.025)
                info = await js.stream_info("nerve")
                await nc.close()
                assert info.state.messages == 3, info.state  # only beta's own three publishes were stored

            asyncio.run(as_beta())
            assert len(refused) >= 3 and all("permissions violation" in r.lower() for r in refused), refused
            payloads = wait_for(lambda: len(got(home, "store")) >= 2 and [p for _, _, p in got(home, "store")], 20,
                                what="beta's own events at alpha")
            forged = wait_for(lambda: [r for r in read_logs(home, "system", "warning") if r["ref"] == "fleet"], 20,
                              what="the forged header's warning")
            code, out = engine.stop()
    assert code == 0, out
    assert sorted(payloads, key=str) == [{"d": 1}, {"n": 1}]  # neither the forged header nor another's subject
    assert "says it is from gamma: refused" in forged[0]["payload"]["message"]
