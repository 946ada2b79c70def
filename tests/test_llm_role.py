"""llm_role in-process with the offline echo model: sync and async forms, prompt builders, settings from the thread."""

from __future__ import annotations

import asyncio
import json

import pytest

from nerve_cli.automaton.context import ThreadInfo, enter_thread
from nerve_cli.automaton.model import RoleSetupError, WorkflowMessage, person_answer, start_message
from nerve_cli.roles.llm import llm_role, transcript


def chain() -> list[WorkflowMessage]:
    return [start_message("hello", 5, 0), WorkflowMessage("writer", "draft one", {}, 1),
            person_answer("reject", "shorter please", "test", 2)]


def call(role, messages, info: ThreadInfo | None = None):
    async def main():
        if info is not None:
            enter_thread(info)
        return await role(messages)

    return asyncio.run(main())


def test_transcript_labels_every_speaker() -> None:
    assert transcript(chain()) == "[prompt]\nhello\n\n[writer]\ndraft one\n\n[person: reject]\nshorter please"


@pytest.mark.parametrize("sync", [True, False])
def test_sync_and_async_forms_answer_with_model_usage_and_duration(sync: bool) -> None:
    result = call(llm_role(model="echo", system="Be terse.", sync=sync, conversation=False), chain())
    echoed = json.loads(result.content)
    assert echoed["system"] == "Be terse." and echoed["prompt"] == transcript(chain())
    assert result.meta["model"] == "echo" and result.meta["usage"]["input"] > 0
    assert "conversation_id" not in result.meta and result.meta["duration_ms"] >= 0


def test_model_and_system_come_from_the_thread_when_the_role_sets_none() -> None:
    async def builder(messages):  # async prompt builders work too
        return f"{len(messages)} messages"

    result = call(llm_role(prompt=builder), chain(), ThreadInfo("run-1", "w", model="echo", system="From yaml."))
    echoed = json.loads(result.content)
    assert (echoed["prompt"], echoed["system"], result.meta["model"]) == ("3 messages", "From yaml.", "echo")


def test_the_default_model_is_llms_own_default(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setenv("LLM_USER_PATH", str(tmp_path))
    (tmp_path / "default_model.txt").write_text("echo")
    assert call(llm_role(), chain()).meta["model"] == "echo"


def test_setup_errors_name_the_fix() -> None:
    with pytest.raises(RoleSetupError, match=r"unknown model 'no-such-model'.*`llm install PLUGIN`"):
        call(llm_role(model="no-such-model"), chain())
    with pytest.raises(RoleSetupError, match="llm keys set echo-needs-key"):
        call(llm_role(model="echo-needs-key"), chain())


def test_a_prompt_builder_must_return_text() -> None:
    with pytest.raises(TypeError, match="expected str"):
        call(llm_role(model="echo", prompt=lambda messages: 42), chain())
