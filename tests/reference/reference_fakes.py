"""Fakes for the reference-doc examples: pydantic-ai agents on `FunctionModel`s, no network.

Every agent here answers from a Python function, so each example's outcome is exact.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

models.ALLOW_MODEL_REQUESTS = False


def last_prompt(messages: Sequence[ModelMessage]) -> str:
    """The text of the newest user prompt in `messages`."""
    for message in reversed(messages):
        for part in reversed(getattr(message, "parts", [])):
            if getattr(part, "part_kind", "") == "user-prompt" and isinstance(part.content, str):
                return part.content
    return ""


def replying(text: str, name: str | None = None) -> Agent[None, str]:
    """An agent that always answers `text`."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(text)])

    return Agent(FunctionModel(respond, model_name=f"reply-{text[:12]}"), name=name)


def answering(fn: Callable[[str], str], name: str | None = None) -> Agent[None, str]:
    """An agent whose answer is `fn(prompt)`."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(fn(last_prompt(messages)))])

    return Agent(FunctionModel(respond, model_name="answering"), name=name)


class ScriptedDesigner:
    """A meta-agent model that answers `TopologyDesign`s from a script, one per call."""

    def __init__(self, designs: Sequence[dict[str, Any]]) -> None:
        self.designs = [json.dumps(d) for d in designs]
        self.calls = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls += 1
        out = self.designs.pop(0) if len(self.designs) > 1 else self.designs[0]
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, out)])

    def model(self) -> FunctionModel:
        return FunctionModel(self, model_name="designer")


def pipeline_of(*names: str) -> dict[str, Any]:
    """A pipeline spec (as JSON data) of function steps."""
    return {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "function_step", "callable_name": n}} for n in names],
    }
