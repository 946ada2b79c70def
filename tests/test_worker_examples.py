"""The example senses `nerve init` writes load and compute in a real worker, together in their group."""

from __future__ import annotations

from sensekit import db_rows

from nerve_cli.config.load import load_config
from nerve_cli.instance.scaffold import create_instance
from nerve_cli.ops.senses.standalone import compute_standalone
from nerve_cli.ops.senses.worker_client import SenseWorkerClient
from nerve_cli.schema.migrate import generate_migration
from nerve_cli.wire.protocol import Signal


def test_example_senses_compute_in_one_group_worker(home) -> None:
    create_instance(home)
    config = load_config(home)
    examples = sorted(p.name for p in (home / "senses").iterdir() if p.is_dir())
    assert len(examples) == 3
    for name in examples:
        assert generate_migration(home / "senses" / name) is None, f"{name}: committed migrations lag schema.py"
    groups = {config.senses[n].group for n in examples}
    for group in groups:
        members = [n for n in examples if config.senses[n].group == group]
        with SenseWorkerClient(home, group) as w:
            assert sorted(w.ready.senses) == sorted(members) and not w.ready.failed, w.ready
            for name in members:
                answer = w.compute(name, timeout=30)
                assert isinstance(answer, Signal), (name, answer)
    for name in examples:
        assert db_rows(home, name, "select count(*) from _signals") == [(1,)]
        user_tables = db_rows(home, name, "select name from sqlite_master where type='table' and name not like '\\_%' escape '\\' and name not like 'sqlite_%'")
        assert user_tables and all(db_rows(home, name, f'select count(*) from "{t}"')[0][0] >= 1 for (t,) in user_tables)


def test_example_sense_standalone(home) -> None:
    create_instance(home)
    result = compute_standalone(home, "disk-usage")
    assert result.outcome == "signal", result
