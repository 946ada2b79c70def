"""The documents Nerve hands to scripts and agents: one shape per answer, built here, outside the CLI.

Every document is a plain dict with `version` at its top level; `nerve ... --json`,
`nerve mcp` and `nerve top` all return these shapes. The rules (docs/reference/json.md,
"JSON output"):
- time: `<name>_ms` (integer unix ms) beside `<name>` (ISO 8601 UTC string);
  durations `<name>_s` (seconds);
- collections are arrays of objects, each carrying its own key (`name`,
  `run_id`, `id`), in a stated order;
- errors: `{"version": 1, "error": {"type", "message", "exit_code", ...}}`.

A change that renames, retypes or removes a field bumps VERSION; within a version documents only
gain fields and enumerated values, so the schema files in `schemas/` are open to both (the contract
tests validate every document against them, closed, and against version 1's first schemas).
"""

from __future__ import annotations

VERSION = 1
