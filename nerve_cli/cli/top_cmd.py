from nerve_cli.cli.common import HomeOption, UtcOption


def top(home: HomeOption = None, _utc: UtcOption = False) -> None:
    """A live dashboard: senses, workers, threads, signals and errors as they happen.

    Reads the running engine through its control socket; when the engine is
    stopped it shows the instance read-only from its files, and says so
    (each enabled sense is `stopped`, beside when it last ran).
    Keys: enter opens a sense (its chart and recent signals) or a thread (its
    rounds), c computes the selected sense, a / x approve or reject a thread
    waiting for a person, tab moves between tables, q quits.

    Example: nerve top
    """
    from nerve_cli.cli import output
    from nerve_cli.home import require_instance
    from nerve_cli.top.app import NerveTop

    NerveTop(require_instance(home), utc=output.utc()).run()
