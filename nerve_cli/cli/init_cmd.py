
from nerve_cli.cli.common import HomeOption
from nerve_cli.words import plural


def init(home: HomeOption = None) -> None:
    """Create a new instance folder: nerve.yaml, example senses, a git repo.

    Refuses (and changes nothing) when the folder already holds a nerve.yaml or
    anything else. The first commit uses your git identity, or `Nerve
    <nerve@localhost>` when none is configured.

    Example: nerve init --home ~/my-nerve
    """
    from nerve_cli.cli import output
    from nerve_cli.home import resolve_home
    from nerve_cli.instance.git import HOW_TO_SET_IDENTITY
    from nerve_cli.instance.scaffold import create_instance

    result = create_instance(resolve_home(home))
    sha = f" (first commit {result.sha[:7]})" if result.sha else ""
    output.info(f"Created a Nerve instance in {result.home}{sha}: {plural(len(result.files), 'file')}.", style="green")
    if result.fallback_identity:
        output.warn(
            "no git identity is configured, so the first commit was made as `Nerve <nerve@localhost>`; "
            + HOW_TO_SET_IDENTITY
        )
    flag = f" --home {result.home}" if home else ""
    output.info("Next steps:")
    output.info(f"  nerve config check{flag}   # validate nerve.yaml against the folder")
    output.info(f"  nerve run{flag}            # start the engine (Ctrl-C stops it)")
