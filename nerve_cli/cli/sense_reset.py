
from nerve_cli.cli.common import HomeOption, SenseName


def reset(name: SenseName, home: HomeOption = None) -> None:
    """Lift a sense's failure back-off or quarantine (through the running engine, or on disk).

    Example: nerve sense reset flaky-api
    """
    from nerve_cli.cli import output
    from nerve_cli.errors import EngineNotRunning
    from nerve_cli.home import Layout, require_instance
    from nerve_cli.ops.client import request
    from nerve_cli.store.quarantines import reset_offline

    path = require_instance(home)
    try:
        was = request(path, "reset", sense=name)["was_blocked"]
    except EngineNotRunning:
        was = reset_offline(Layout(path).logs_db, name)
    output.info(f"{name}: {'penalty/quarantine lifted' if was else 'was not penalised or quarantined'}")
