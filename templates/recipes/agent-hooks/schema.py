"""Tables of {{name}}: what a coding agent's harness did, folded per session from its hook events."""

from nerve_cli.sdk import table


@table(pk="session_id")
class HookSession:
    session_id: str
    first_ms: int  # its first hook event, unix ms
    last_ms: int  # its latest
    events: int
    failed_commands: int
    files_edited: int
    tool_errors: int


@table(pk=["session_id", "kind", "detail"])
class HookNote:
    session_id: str
    kind: str  # failed_command | file_edited | tool_error
    detail: str  # the command, the file's path, or "TOOL: error"
    last_ms: int
    count: int
