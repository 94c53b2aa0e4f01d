"""Offline fakes for the orchestrator: a scripted planner and specialists on `FunctionModel`s.

They make no network call and are deterministic, for tests, benchmarks and the README's
offline example:

- `planner_model(decompositions, spec_for)`: answers a decomposition request
  (`TaskDecomposition` output) with the next of `decompositions` (the last one repeats), and a
  specialist design request (`AgentSpec` output) with `spec_for(subtask_name)`;
- `specialist_model(answer)`: answers with `answer(subtask_name)` as the structured output
  (default `{"answer": "done: <subtask>", "confidence": 0.9}`).

Subtask names are read from the prompts the orchestrator writes (`Subtask <name>: ...` for a
specialist, `Subtask: <name>: ...` for a design request).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.autonomy.meta import TaskDecomposition
from core.ir.agent_spec import AgentSpec

__all__ = ["ANSWER_SCHEMA", "default_spec", "planner_model", "specialist_model"]

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "confidence": {"type": "number"}},
    "required": ["answer"],
}
"""The output schema of `default_spec`'s specialists."""

_SUBTASK = re.compile(r"Subtask:? (\S+?):")


def _prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        for part in getattr(message, "parts", []):
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                return part.content
    return ""


def _subtask(messages: list[ModelMessage]) -> str:
    found = _SUBTASK.search(_prompt(messages))
    return found.group(1) if found else "unknown"


def default_spec(subtask: str) -> AgentSpec:
    """A specialist for `subtask`: named `<subtask>_specialist`, answering `ANSWER_SCHEMA`."""
    return AgentSpec(
        name=f"{subtask}_specialist",
        system_prompt=f"You handle the subtask {subtask}.",
        output_schema=ANSWER_SCHEMA,
        constraints=["Report a confidence between 0 and 1"],
    )


def planner_model(
    decompositions: Sequence[TaskDecomposition],
    spec_for: Callable[[str], AgentSpec] = default_spec,
    *,
    name: str = "planner",
) -> FunctionModel:
    """A planner `FunctionModel` (see the module docstring); `calls` counts are kept on
    `model.decompositions_served`."""
    state = {"served": 0}

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        props: dict[str, Any] = tool.parameters_json_schema.get("properties", {})
        if "subtasks" in props:
            index = min(state["served"], len(decompositions) - 1)
            state["served"] += 1
            args = decompositions[index].model_dump(mode="json")
        else:
            args = spec_for(_subtask(messages)).model_dump(mode="json")
        return ModelResponse(parts=[ToolCallPart(tool.name, args)])

    return FunctionModel(fn, model_name=name)


def specialist_model(
    answer: Callable[[str], dict[str, Any]] | None = None, *, name: str = "specialist"
) -> FunctionModel:
    """A specialist `FunctionModel` answering `answer(subtask)` as its structured output."""

    def default(subtask: str) -> dict[str, Any]:
        return {"answer": f"done: {subtask}", "confidence": 0.9}

    pick = answer or default

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        return ModelResponse(parts=[ToolCallPart(tool.name, pick(_subtask(messages)))])

    return FunctionModel(fn, model_name=name)
