"""The engine's vocabulary as typed values: what it decides and records, each value documented once.

- `reasons`: why a compute runs (`TriggerKind`, and `Reason`: the kind and the source as fields);
- `outcomes`: how a compute ended (`Outcome`);
- `states`: a sense worker group's state (`WorkerState`), a sense's state in status (`SenseStatus`),
  a thread's status (`ThreadStatus`);
- `logrows`: the kinds of rows in logs.db (`LogKind`) and one constructor per kind.

The enums are `StrEnum`s whose values are what logs.db, `--json` and the wire have always held:
a value compares equal to its string and serialises as it. Nothing here imports the rest of Nerve.
"""
