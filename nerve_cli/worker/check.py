"""`python -m nerve_cli.worker check`: import senses and workflows in a child and report what would fail.

`nerve config check` and `nerve doctor` run this in a child process so user
code (its imports, its top-level statements, its prints) never runs in the CLI
process. The checks are the ones a worker makes when it loads: a sense's files
import, `compute` exists with a usable signature, schema.py agrees with the
migrations; a workflow file imports and defines a valid `workflow` (a plain,
non-async moderator). The answer is one JSON object on the protocol fd:
`{"problems": [{kind, name, type, message, file, line}]}`, after one
`{"importing": path}` line per sense or workflow as it starts, so a parent that
gives up waiting can say which file blocked.

With `--from-config` the child picks the enabled senses and workflows itself,
from a quick read of nerve.yaml (PyYAML's C loader: it need not wait for the
parent's validation), and says which first: `{"checked": {"senses", "workflows"}}`
(null when the quick read failed). The parent keeps the answer only if its
validated config asks for exactly those.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import orjson

from nerve_cli.automaton.check import definition_problems
from nerve_cli.home import Layout
from nerve_cli.worker.load import check_sense
from nerve_cli.worker.stdio import ProtocolWriter, take_protocol_fds


def check(home: Path, senses: list[str], workflows: list[str],
          importing: Callable[[str], None] = lambda where: None) -> list[dict[str, Any]]:
    layout = Layout(home)
    problems = []
    for name in senses:
        importing(f"senses/{name}/")
        info = check_sense(layout, name)
        if info is not None:
            problems.append({"kind": "sense", "name": name, **info.to_dict()})
    for name in workflows:  # every problem of each definition, not only the first
        importing(f"workflows/{name}.py")
        problems += [{"kind": "workflow", "name": name, **f.to_dict()}
                     for f in definition_problems(home, name)]
    return problems


def enabled_in_config(home: Path) -> tuple[list[str], list[str]] | None:
    """The enabled senses and workflows nerve.yaml names whose files exist, from a quick read; None if it fails."""
    import yaml  # a quick read by PyYAML's own rules (YAML 1.1): enough to name what to import; validating is the parent's

    layout = Layout(home)
    try:
        doc = yaml.load(layout.config.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        senses, workflows = _enabled(doc.get("senses")), _enabled(doc.get("workflows"))
    except Exception:  # whatever trips the quick read, the parent's validation reports properly
        return None
    files = {n: layout.workflow_file(n) for n in workflows}  # a pipeline file is read by the parent, not imported
    return ([n for n in senses if (layout.sense_dir(n) / "sense.py").is_file()],
            [n for n, f in files.items() if f.suffix == ".py" and f.is_file()])


def _enabled(section: Any) -> list[str]:
    if section is None:
        return []
    return [name for name, body in section.items()
            if isinstance(name, str) and not (isinstance(body, dict) and body.get("enabled", True) is False)]


def main(args: Any) -> int:
    out = ProtocolWriter(take_protocol_fds().write)  # the user's prints go to stderr, never into the answer
    names = lambda text: [n for n in (text or "").split(",") if n]  # noqa: E731
    importing = lambda where: out.write(orjson.dumps({"importing": where}, option=orjson.OPT_APPEND_NEWLINE))  # noqa: E731
    home = Path(args.home).resolve()
    senses, workflows = names(args.senses), names(args.workflows)
    if args.from_config:
        picked = enabled_in_config(home)
        out.write(orjson.dumps({"checked": None if picked is None else {"senses": picked[0], "workflows": picked[1]}},
                               option=orjson.OPT_APPEND_NEWLINE))
        if picked is None:
            out.close()
            return 0
        senses, workflows = picked
    problems = check(home, senses, workflows, importing)
    out.write(orjson.dumps({"problems": problems}, option=orjson.OPT_APPEND_NEWLINE))
    out.close()
    return 0
