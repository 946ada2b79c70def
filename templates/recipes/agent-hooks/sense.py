"""{{name}}: a coding agent's hook events, folded per session — commands that failed, files edited, tool errors.

Listens to a channel its harness posts its hooks to (Claude Code's HTTP hooks,
or a command hook running `nerve emit`): each event's payload is the hook's
JSON (`session_id`, `hook_event_name`, `tool_name`, `tool_input`,
`tool_response`, `error`), or `{"headers": ..., "body": <it>}` from a channel
that keeps headers. Give that channel `key: body.tool_use_id` so a hook posted
twice is one event. The agent (or another one) reads it back through MCP:
`query_sense` on `hook_note` (`SELECT * FROM hook_note WHERE session_id = ?`),
or `show_sense`. Signals the sessions that changed, with their counts.
"""

from .schema import HookNote, HookSession

EDITS = ("Write", "Edit", "MultiEdit", "NotebookEdit")
EXIT_KEYS = ("exit_code", "exitCode", "returncode", "return_code")
COUNTS = {"failed_command": "failed_commands", "file_edited": "files_edited", "tool_error": "tool_errors"}


def notes_of(hook: dict) -> list[tuple[str, str]]:
    """(kind, detail) of what one hook event says went wrong or changed."""
    tool, given = hook.get("tool_name"), hook.get("tool_input") or {}
    answer = hook.get("tool_response") if isinstance(hook.get("tool_response"), dict) else {}
    event = hook.get("hook_event_name")
    out = []
    if event == "PostToolUseFailure":
        out.append(("tool_error", f"{tool}: {str(hook.get('error', ''))[:500]}"))
        if tool == "Bash":
            out.append(("failed_command", str(given.get("command", ""))[:500]))
    elif event == "PostToolUse":
        code = next((answer[k] for k in EXIT_KEYS if k in answer), 0)
        if tool == "Bash" and (code not in (0, None) or answer.get("interrupted")):
            out.append(("failed_command", str(given.get("command", ""))[:500]))
        if tool in EDITS and given.get("file_path"):
            out.append(("file_edited", str(given["file_path"])))
        if answer.get("is_error") or answer.get("isError"):
            out.append(("tool_error", f"{tool}: {str(answer.get('error') or answer.get('content', ''))[:500]}"))
    return out


def compute(db, peers, trigger):
    changed = {}
    for event in trigger.events:
        hook = event.payload if isinstance(event.payload, dict) else {}
        hook = hook.get("body", hook) if "headers" in hook and isinstance(hook.get("body"), dict) else hook
        session = str(hook.get("session_id") or "unknown")
        found = db.rows(HookSession, where="session_id = ?", params=(session,))
        row = found[0] if found else HookSession(session_id=session, first_ms=event.ts, last_ms=event.ts, events=0,
                                                  failed_commands=0, files_edited=0, tool_errors=0)
        row.events += 1
        row.last_ms = event.ts
        for kind, detail in notes_of(hook):
            seen = db.rows(HookNote, where="session_id = ? AND kind = ? AND detail = ?", params=(session, kind, detail))
            count = seen[0].count + 1 if seen else 1
            db.upsert(HookNote(session_id=session, kind=kind, detail=detail, last_ms=event.ts, count=count))
            if not seen:
                setattr(row, COUNTS[kind], getattr(row, COUNTS[kind]) + 1)
        db.upsert(row)
        changed[session] = row
    if not changed:
        return None
    return {"sessions": [{"session_id": s, "failed_commands": r.failed_commands, "files_edited": r.files_edited,
                          "tool_errors": r.tool_errors, "events": r.events} for s, r in changed.items()]}
