"""What user code imports: `from nerve_cli.sdk import table, SenseResult, ...`.

Names are resolved lazily so importing the SDK in a worker costs only what is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the real names (re-exported); at run time they load lazily
    from nerve_cli.automaton.directive import SenseResult as SenseResult
    from nerve_cli.automaton.directive import directive as directive
    from nerve_cli.automaton.model import (
        END as END,
    )
    from nerve_cli.automaton.model import (
        EVENT as EVENT,
    )
    from nerve_cli.automaton.model import (
        PERSON as PERSON,
    )
    from nerve_cli.automaton.model import (
        START as START,
    )
    from nerve_cli.automaton.model import (
        AskPerson as AskPerson,
    )
    from nerve_cli.automaton.model import (
        Moderator as Moderator,
    )
    from nerve_cli.automaton.model import (
        Role as Role,
    )
    from nerve_cli.automaton.model import (
        RoleResult as RoleResult,
    )
    from nerve_cli.automaton.model import (
        RoleSetupError as RoleSetupError,
    )
    from nerve_cli.automaton.model import (
        WorkflowDefinition as WorkflowDefinition,
    )
    from nerve_cli.automaton.model import (
        WorkflowMessage as WorkflowMessage,
    )
    from nerve_cli.automaton.model import (
        ask_person as ask_person,
    )
    from nerve_cli.automaton.waits import Sleep as Sleep
    from nerve_cli.automaton.waits import WaitForEvent as WaitForEvent
    from nerve_cli.automaton.waits import sleep as sleep
    from nerve_cli.automaton.waits import wait_for_event as wait_for_event
    from nerve_cli.roles import nerve_tools as nerve_tools
    from nerve_cli.roles.llm import llm_role as llm_role
    from nerve_cli.roles.llm import transcript as transcript
    from nerve_cli.roles.tools import tool as tool
    from nerve_cli.schema.declare import index as index
    from nerve_cli.schema.declare import table as table
    from nerve_cli.store.blobs import BlobStore as BlobStore
    from nerve_cli.store.events import KEEP as KEEP
    from nerve_cli.store.events import Event as Event
    from nerve_cli.store.events import Trigger as Trigger
    from nerve_cli.store.fanout import emit as emit
    from nerve_cli.store.logview import LogReader as LogReader

_EXPORTS = {
    "table": "nerve_cli.schema.declare",
    "index": "nerve_cli.schema.declare",
    "SenseResult": "nerve_cli.automaton.directive",
    "emit": "nerve_cli.store.fanout",
    "directive": "nerve_cli.automaton.directive",
    "START": "nerve_cli.automaton.model",
    "END": "nerve_cli.automaton.model",
    "WorkflowMessage": "nerve_cli.automaton.model",
    "RoleResult": "nerve_cli.automaton.model",
    "Role": "nerve_cli.automaton.model",
    "Moderator": "nerve_cli.automaton.model",
    "WorkflowDefinition": "nerve_cli.automaton.model",
    "PERSON": "nerve_cli.automaton.model",
    "AskPerson": "nerve_cli.automaton.model",
    "ask_person": "nerve_cli.automaton.model",
    "RoleSetupError": "nerve_cli.automaton.model",
    "EVENT": "nerve_cli.automaton.model",
    "wait_for_event": "nerve_cli.automaton.waits",
    "WaitForEvent": "nerve_cli.automaton.waits",
    "sleep": "nerve_cli.automaton.waits",
    "Sleep": "nerve_cli.automaton.waits",
    "BlobStore": "nerve_cli.store.blobs",
    "llm_role": "nerve_cli.roles.llm",  # imports llm only when its role is first called
    "transcript": "nerve_cli.roles.llm",
    "tool": "nerve_cli.roles.tools",
    "nerve_tools": "nerve_cli.roles.nerve_tools",  # a module: nerve_tools.query_sense, nerve_tools.READ_ONLY
    "KEEP": "nerve_cli.store.events",
    "Event": "nerve_cli.store.events",
    "Trigger": "nerve_cli.store.events",
    "LogReader": "nerve_cli.store.logview",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"nerve_cli.sdk has no {name!r}; available: {', '.join(__all__)}")
    loaded = importlib.import_module(module)
    return loaded if module.endswith(f".{name}") else getattr(loaded, name)
