"""`nerve workflow disable|enable`: no cascade; a disabled workflow's directives are refused by the engine."""


from nerve_cli.cli.common import HomeOption, JsonOption, WorkflowName

Name = WorkflowName


def disable(name: Name, home: HomeOption = None, json_: JsonOption = False) -> None:
    """Disable a workflow: directives for it are refused (nothing is deleted).

    Running threads finish; new ones are refused until it is enabled again.

    Example: nerve workflow disable cleanup
    """
    _set(name, home, False, json_)


def enable(name: Name, home: HomeOption = None, json_: JsonOption = False) -> None:
    """Enable a workflow again.

    Example: nerve workflow enable cleanup
    """
    _set(name, home, True, json_)


def _set(name: str, home, enabled: bool, json_: bool) -> None:
    from nerve_cli.cli import output
    from nerve_cli.cli.sense_lifecycle import engine_note
    from nerve_cli.config.lifecycle import set_workflow
    from nerve_cli.home import require_instance

    root = require_instance(home)
    outcome = set_workflow(root, name, enabled)
    word = "enabled" if enabled else "disabled"
    if json_:
        from nerve_cli.cli.sense_lifecycle import bring_back
        from nerve_cli.contract.senses import lifecycle

        output.print_json(lifecycle(outcome, bring_back))
        return
    if not outcome.written:
        output.info(f"workflow {name} is already {word}; nothing changed")
        return
    output.notes(outcome.notes)
    effect = "directives for it start threads again" if enabled else "the engine refuses directives for it"
    committed = f"; committed {outcome.sha[:8]}" if outcome.sha else ""
    output.info(f"workflow {name} {word}: {effect}{committed}", style="green")
    launchers = _launchers(root, name)
    if launchers and not enabled:
        output.info(f"senses seen launching it: {', '.join(launchers)} (their directives now get an error log)")
    engine_note(outcome)


def _launchers(root, name: str) -> list[str]:
    """Senses whose directives launched this workflow, as seen in data/logs.db."""
    from nerve_cli.config.mesh import observed_launches
    from nerve_cli.home import Layout

    return sorted(sense for sense, workflow in (observed_launches(Layout(root).logs_db) or {}) if workflow == name)
