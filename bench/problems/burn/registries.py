"""The `burn` bench problem (see problem.toml): `echo` answers `"q<n>"` with `"<n>"`; the score
function busy-loops `[params] burn_ms` of this thread's CPU time before it compares."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


class Params(BaseModel):
    """`[params]` of the problem."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    burn_ms: float = 20.0
    n_examples: int = 240


def _respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = ""
    for message in messages:
        for part in getattr(message, "parts", ()):
            if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                prompt = part.content
    digits = "".join(c for c in prompt if c.isdigit()) or "0"
    return ModelResponse(
        parts=[TextPart(digits)], usage=RequestUsage(input_tokens=5, output_tokens=1)
    )


def _burn(ms: float) -> None:
    """Busy-loop until this thread has used `ms` milliseconds of CPU."""
    end = time.thread_time() + ms / 1000.0
    while time.thread_time() < end:
        pass


def build(ctx: ProblemContext) -> ProblemParts:
    """The problem's parts (see the module docstring)."""
    params = ctx.params_as(Params)
    model = FunctionModel(_respond, model_name="echo")
    agents = AgentRegistry()
    agents.register("echo", lambda: Agent(model, output_type=str), "Echoes the number.")
    callables = CallableRegistry()

    def score(output: object, example: GoldExample) -> float:
        _burn(params.burn_ms)
        return float(str(output).strip() == example.expected)

    return ProblemParts(
        callable_registry=callables,
        agent_registry=agents,
        score_functions={"exact": score},
        load_gold=lambda: [
            GoldExample(input=f"q{i}", expected=str(i), id=f"b{i:04d}")
            for i in range(params.n_examples)
        ],
    )
