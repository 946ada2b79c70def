
from typing import Annotated, Optional

import typer

from nerve_cli.cli import complete
from nerve_cli.cli.common import HomeOption, JsonOption
from nerve_cli.words import plural


def migrate(
    name: Annotated[Optional[str], typer.Argument(help="Sense name (or use --all).", autocompletion=complete.senses)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Every sense in the instance.")] = False,
    allow_data_loss: Annotated[bool, typer.Option("--allow-data-loss", help="Write a migration that drops tables or columns.")] = False,
    slug: Annotated[Optional[str], typer.Option("--name", help="File name part for the new migration (default: made from the change).")] = None,
    home: HomeOption = None,
    json_: JsonOption = False,
) -> None:
    """Generate the next SQL migration from the sense's schema.py.

    Compares schema.py with what senses/NAME/migrations/*.sql build and writes
    the next numbered file (nothing when nothing changed), then commits it.

    Example: nerve sense migrate cpu-usage
    """
    from nerve_cli.cli import output
    from nerve_cli.errors import NerveError
    from nerve_cli.home import require_instance
    from nerve_cli.schema.instance import migrate_senses

    if bool(name) == all_:
        raise typer.BadParameter("give a sense NAME or --all (not both)")
    root = require_instance(home)
    results, sha = migrate_senses(root, None if all_ or name is None else [name], allow_data_loss=allow_data_loss,
                                  name=slug)
    failed = [r.sense for r in results if r.error]
    if json_:
        from nerve_cli.contract.senses import migrate as migrate_document

        output.print_json(migrate_document(root, results, sha))
        if failed:
            raise typer.Exit(1)
        return
    for r in results:
        if r.error:
            output.error(f"{r.sense}: {r.error}")
        elif r.path is None:
            output.info(f"{r.sense}: up to date")
        else:
            output.info(f"{r.path.relative_to(root)} written ({plural(r.statements, 'statement')}: {'; '.join(r.changes)})")
    if sha:
        output.info(f"committed {sha[:8]}", style="dim")
    if not results:
        output.info("no senses with a schema.py under senses/")
    if failed:
        raise NerveError(f"{plural(len(failed), 'sense')} could not be migrated: {', '.join(failed)}")
