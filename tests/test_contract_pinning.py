"""A contract a client can pin: open schemas in one normal form, the v1 schemas still passing, every error type listed.

The documents of a whole run are validated against the schemas as first published for version 1 in
test_cli_contract.py and test_mcp_server.py (contractkit.Checked); here: the rules themselves, and that
they bite.
"""

from __future__ import annotations

import copy
import importlib
import json
import pkgutil
import re
from pathlib import Path

import jsonschema
import pytest
import schemarules
from contractkit import PINNED, closed, pinned
from enginekit import write_instance
from typer.testing import CliRunner

import nerve_cli
from nerve_cli.cli import output
from nerve_cli.cli.app import app
from nerve_cli.contract.schema import KINDS, schema
from nerve_cli.errors import ErrorType, NerveError

JSON_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "json.md"
TROUBLESHOOTING = Path(__file__).resolve().parents[1] / "docs" / "troubleshooting.md"


def valid(against: dict, doc: object) -> bool:
    return jsonschema.Draft202012Validator(against).is_valid(doc)


def test_every_shipped_schema_is_open_portable_and_in_its_normal_form() -> None:
    for kind in KINDS:
        shipped = schema(kind)
        assert schemarules.problems(shipped) == [], f"{kind}.json: run `python tests/schemarules.py --fix`"
        assert schemarules.normal_form(shipped) == shipped, f"{kind}.json: run `python tests/schemarules.py --fix`"
        jsonschema.Draft202012Validator.check_schema(shipped)
    assert sorted(p.stem for p in PINNED.glob("*.json")) == sorted(  # the kinds version 1 began with
        ["archive", "backup", "config-check", "doctor", "emit", "error", "lifecycle", "log", "mesh", "sense-chart",
         "sense-compute", "sense-list", "sense-show", "status", "thread-list", "thread-show", "workflow-list",
         "workflow-run"])


def test_a_client_pinned_to_version_1_accepts_what_a_version_adds_and_refuses_what_it_would_break(home: Path) -> None:
    write_instance(home, "senses:\n  a: {}\n", {"a": "def compute(db, peers):\n    return {'n': 1}\n"})
    output.reset()
    done = CliRunner().invoke(app, ["sense", "list", "--json"])
    assert done.exit_code == 0, done.output
    doc = json.loads(done.stdout)
    then, now, ours = pinned("sense-list"), schema("sense-list"), closed("sense-list")
    assert valid(then, doc) and valid(now, doc) and valid(ours, doc)
    grown = copy.deepcopy(doc)
    grown["pages"] = 1  # a field added by a later release of version 1
    grown["senses"][0]["stale"] = False
    assert valid(then, grown) and valid(now, grown)
    assert not valid(ours, grown)  # our own tests catch a field printed but not documented
    retyped = copy.deepcopy(doc)
    retyped["senses"][0]["signal_count"] = "0"
    removed = copy.deepcopy(doc)
    del removed["senses"][0]["group"]
    for broken in (retyped, removed):
        assert not valid(then, broken) and not valid(now, broken)
    # an enumeration may gain a value (a new thread status), never lose its type
    outcome = {"version": 1, "event": "outcome", "run_id": "run-1", "status": "cancelled", "reason": None,
               "rounds": 0, "via": "engine"}
    assert valid(pinned("workflow-run"), outcome) and valid(schema("workflow-run"), outcome)
    assert not valid(closed("workflow-run"), outcome)  # until it is listed
    assert not valid(pinned("workflow-run"), {**outcome, "status": 3})


def _all_error_classes() -> list[type[NerveError]]:
    for module in pkgutil.walk_packages(nerve_cli.__path__, "nerve_cli."):
        if ".templates" not in module.name and not module.name.endswith("__main__"):
            importlib.import_module(module.name)
    found, stack = [], [NerveError]
    while stack:
        cls = stack.pop()
        found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


def test_every_error_type_the_code_can_raise_is_listed_in_the_schema_and_the_docs() -> None:
    classes = _all_error_classes()
    assert len(classes) >= 15
    for cls in classes:  # a new error class names its type; a new type joins ErrorType, error.json and the docs
        assert "type" in vars(cls), f"{cls.__module__}.{cls.__name__} does not set `type = ErrorType.X`"
        assert isinstance(cls.type, ErrorType)
    listed = [t.value for t in ErrorType]
    shipped = schema("error")["properties"]["error"]["properties"]["type"]["anyOf"][0]["enum"]
    assert shipped == listed, "nerve_cli/contract/schemas/error.json lists other types than ErrorType"
    table = re.findall(r"^### `([a-z_]+)`$", TROUBLESHOOTING.read_text(encoding="utf-8"), re.M)
    assert table == listed, "docs/troubleshooting.md's error types are other types than ErrorType (run `make reference`)"
    source = "\n".join(p.read_text(encoding="utf-8") for p in Path(nerve_cli.__file__).parent.rglob("*.py"))
    used = {cls.type for cls in classes} | {ErrorType[m] for m in re.findall(r"ErrorType\.([A-Z_]+)", source)}
    assert set(ErrorType) == used, f"types nothing raises: {set(ErrorType) - used}"


def test_an_unexpected_failure_is_the_internal_error_document() -> None:
    from nerve_cli.mcp.tools import error_document

    doc = error_document(ZeroDivisionError("division by zero"))["error"]
    assert (doc["type"], doc["message"], doc["exit_code"]) == ("internal", "ZeroDivisionError: division by zero", 1)
    assert valid(closed("error"), {"version": 1, "error": doc})


@pytest.mark.parametrize("kind", ["status", "thread-show", "log"])
def test_iso_times_are_date_time_and_nullable_values_anyof(kind: str) -> None:
    text = json.dumps(schema(kind))
    assert '"format": "date-time"' in text and '"type": [' not in text


def _gained(old: object, new: object, where: str = "") -> list[str]:
    """What a closed schema as first published refuses that the schema now allows: fields added to an object it
    closed, values added to an enumeration (each a reason today's documents fail the file as written)."""
    found: list[str] = []
    if not isinstance(old, dict) or not isinstance(new, dict):
        return found
    if old.get("additionalProperties") is False:
        extra = set(new.get("properties", {})) - set(old.get("properties", {}))
        found += [f"{where}: field {name}" for name in sorted(extra)]
    if "enum" in old:
        now = new.get("enum") or next((b.get("enum", []) for b in new.get("anyOf", []) if "enum" in b), [])
        found += [f"{where}: value {v}" for v in sorted(set(now) - set(old["enum"]), key=str)]
    for name, sub in old.get("properties", {}).items():
        found += _gained(sub, new.get("properties", {}).get(name), f"{where}.{name}")
    if "items" in old:
        found += _gained(old["items"], new.get("items"), f"{where}[]")
    for key in ("anyOf", "oneOf"):
        for branch in old.get(key, []):
            for now_branch in new.get(key, [new]):
                if isinstance(branch, dict) and isinstance(now_branch, dict) and branch.get("type") == now_branch.get("type"):
                    found += _gained(branch, now_branch, where)
    return found


def test_the_docs_name_exactly_the_first_published_v1_files_a_client_can_pin_as_written() -> None:
    """The first v1 files were closed, so most of today's documents fail them as written: the docs say which
    still pass, and those are kept passing (a field added to one of them fails here first)."""
    text = JSON_PAGE.read_text(encoding="utf-8")
    listed = set(text.split("pinnable as\n  first published: ", 1)[1].split(".*", 1)[0].replace("\n  ", " ").split(", "))
    pinnable = {path.stem for path in PINNED.glob("*.json")
                if not _gained(json.loads(path.read_text(encoding="utf-8")), schema(path.stem))}
    assert listed == pinnable, (f"docs/reference/json.md lists {sorted(listed)} as pinnable as first published; as written, these "
                                f"pass today: {sorted(pinnable)}")
    assert f"The other {len(list(PINNED.glob('*.json'))) - len(pinnable)} have gained" in " ".join(text.split())
