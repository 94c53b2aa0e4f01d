"""RuntimeTopologyDesigner: the prompt with the seed library's figures, cold design, cache hit
reuse, verify_on_hit catching a renamed agent, fallback_spec on design failures."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import TypeAdapter
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.agents import BaseAgent
from core.ir.design import TopologyDesign
from core.ir.models import TopologySpec
from core.runtime_design import (
    CacheStats,
    InMemoryLRU,
    LibraryEntry,
    RuntimeDesignError,
    RuntimeTopologyDesigner,
)

models.ALLOW_MODEL_REQUESTS = False

ADAPTER: TypeAdapter[Any] = TypeAdapter(TopologySpec)


def spec_of(agent: str, fn: str = "tidy") -> Any:
    return ADAPTER.validate_python(
        {
            "kind": "pipeline",
            "steps": [
                {"operation": {"kind": "agent_step", "agent_name": agent}},
                {"operation": {"kind": "function_step", "callable_name": fn}},
            ],
        }
    )


def tidy(x: Any) -> Any:
    return x


def make_agent() -> Any:
    return Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")])))


class Designer:
    """A pydantic-ai designer with `output_type=TopologyDesign` answering from a script; it
    keeps every prompt it was given."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []
        self.agent = Agent(FunctionModel(self, model_name="designer"), output_type=TopologyDesign)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.prompts.append(str(messages[-1].parts[-1].content))  # type: ignore[union-attr]
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, json.dumps(answer))])


def design_of(spec: Any, thought: str = "reuse") -> dict[str, Any]:
    return {"thought": thought, "spec": ADAPTER.dump_python(spec, mode="json")}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_the_prompt_lists_the_library_with_its_figures() -> None:
    designer = RuntimeTopologyDesigner(
        Designer().agent,
        {"tidy": tidy},
        {"cot": make_agent, "solver": make_agent},
        seed_library=[
            LibraryEntry(
                spec=spec_of("cot"), accuracy=0.875, cost_usd=0.00012, latency_ms=850.25, label="c7"
            ),
            spec_of("solver"),
        ],
    )
    assert designer.design_prompt("What is 2+2?") == "\n".join(
        [
            "Request: What is 2+2?",
            "",
            "Validated topologies, with their measured figures per request. Prefer reusing or "
            "specialising one of them; design a new one only when none fits.",
            "[1] c7 accuracy 0.8750, cost $0.000120, latency 850.2 ms",
            '{"kind":"pipeline","name":"pipeline","steps":[{"config":null,"operation":'
            '{"agent_name":"cot","inline_spec":null,"kind":"agent_step"}},{"config":null,'
            '"operation":{"callable_name":"tidy","kind":"function_step","name":null}}]}',
            "[2] accuracy not measured, cost not measured, latency not measured",
            '{"kind":"pipeline","name":"pipeline","steps":[{"config":null,"operation":'
            '{"agent_name":"solver","inline_spec":null,"kind":"agent_step"}},{"config":null,'
            '"operation":{"callable_name":"tidy","kind":"function_step","name":null}}]}',
            "",
            "Registered agents: cot, solver",
            "Registered callables: tidy",
            "Answer with a TopologyDesign: `thought` (why this topology) and `spec`.",
        ]
    )


def test_cold_design_then_the_cache_hit_is_reused_without_the_designer() -> None:
    script = Designer(design_of(spec_of("cot"), "cot then tidy"))
    cache = InMemoryLRU(8)
    designer = RuntimeTopologyDesigner(
        script.agent, {"tidy": tidy}, {"cot": make_agent}, cache=cache
    )
    cold = run(designer.design("What is 2+2?"))
    assert (cold.source, cold.spec, cold.thought, cold.cache_hit) == (
        "designer",
        spec_of("cot"),
        "cot then tidy",
        None,
    )
    assert script.prompts == [designer.design_prompt("What is 2+2?")]
    assert [(u.model_name, u.requests) for u in cold.usage] == [("function:designer", 1)]
    run(cache.store("What is 2+2?", cold.spec, True))  # what the orchestrator does on success
    warm = run(designer.design("what is  2+2?"))
    assert warm.source == "cache"
    assert warm.spec == spec_of("cot")
    assert warm.cache_hit is not None and warm.cache_hit.reliability == 1.0
    assert warm.usage == ()
    assert len(script.prompts) == 1  # the designer was not called again
    assert cache.stats == CacheStats(hits=1, misses=1, stores=1, decays=0)


def test_verify_on_hit_catches_a_renamed_agent() -> None:
    agents: dict[str, Any] = {"cot": make_agent}
    script = Designer(design_of(spec_of("cot_v2")))
    cache = InMemoryLRU(8)
    run(cache.store("q", spec_of("cot"), True))
    designer = RuntimeTopologyDesigner(script.agent, {"tidy": tidy}, agents, cache=cache)
    assert run(designer.design("q")).source == "cache"
    agents["cot_v2"] = agents.pop("cot")  # renamed after the entry was cached
    result = run(designer.design("q"))
    assert result.source == "designer"
    assert result.spec == spec_of("cot_v2")
    assert result.rejected_hit is not None and result.rejected_hit.spec == spec_of("cot")
    assert cache.reliability("q") == pytest.approx(0.7, rel=1e-12)  # the stale entry decayed
    assert "Registered agents: cot_v2\n" in script.prompts[0]
    assert cache.stats == CacheStats(hits=2, misses=0, stores=1, decays=1)


def test_without_verify_on_hit_the_stale_hit_is_returned() -> None:
    cache = InMemoryLRU(8)
    run(cache.store("q", spec_of("gone"), True))
    designer = RuntimeTopologyDesigner(
        Designer().agent, {"tidy": tidy}, {"cot": make_agent}, cache=cache, verify_on_hit=False
    )
    result = run(designer.design("q"))
    assert (result.source, result.spec) == ("cache", spec_of("gone"))


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (RuntimeError("provider down"), "the designer agent raised RuntimeError: provider down"),
        (
            design_of(spec_of("nobody")),
            "the design names unregistered things "
            "($.steps[0].operation.agent_name: unknown agent 'nobody')",
        ),
    ],
)
def test_fallback_spec_is_used_on_a_design_failure(answer: Any, reason: str) -> None:
    fallback = spec_of("cot")
    designer = RuntimeTopologyDesigner(
        Designer(answer).agent, {"tidy": tidy}, {"cot": make_agent}, fallback_spec=fallback
    )
    result = run(designer.design("q"))
    assert (result.source, result.spec, result.error) == ("fallback", fallback, reason)
    strict = RuntimeTopologyDesigner(Designer(answer).agent, {"tidy": tidy}, {"cot": make_agent})
    with pytest.raises(RuntimeDesignError) as info:
        run(strict.design("q"))
    assert info.value.reason == reason
    assert str(info.value) == f"runtime design failed for goal 'q': {reason}"


def test_a_text_designer_and_an_invalid_text_answer() -> None:
    answers = iter([json.dumps(design_of(spec_of("cot"))), "not json"])
    text_agent = Agent(
        FunctionModel(lambda m, i: ModelResponse(parts=[TextPart(next(answers))]), model_name="t")
    )
    designer = RuntimeTopologyDesigner(text_agent, {"tidy": tidy}, {"cot": make_agent})
    assert run(designer.design("q")).spec == spec_of("cot")
    with pytest.raises(
        RuntimeDesignError, match="the designer's output is not a valid TopologyDesign"
    ):
        run(designer.design("q"))


def test_a_base_agent_designer() -> None:
    script = Designer(design_of(spec_of("cot")))
    base = BaseAgent(
        "runtime_designer", output_type=TopologyDesign, model=FunctionModel(script, model_name="b")
    )
    designer = RuntimeTopologyDesigner(base, {"tidy": tidy}, {"cot": make_agent})
    result = run(designer.design("q"))
    assert (result.source, result.spec) == ("designer", spec_of("cot"))


def test_a_fallback_naming_unknown_things_raises_and_bad_arguments_are_named() -> None:
    designer = RuntimeTopologyDesigner(
        Designer(RuntimeError("x")).agent, {"tidy": tidy}, {}, fallback_spec=spec_of("cot")
    )
    with pytest.raises(RuntimeDesignError, match="and the fallback_spec names unregistered things"):
        run(designer.design("q"))
    with pytest.raises(
        ValueError, match=r"seed_library\[1\]: expected a LibraryEntry or a TopologySpec"
    ):
        RuntimeTopologyDesigner(
            Designer().agent, {}, {}, seed_library=[spec_of("a"), {"kind": "x"}]
        )
    with pytest.raises(ValueError, match="fallback_spec is not a valid TopologySpec"):
        RuntimeTopologyDesigner(Designer().agent, {}, {}, fallback_spec={"kind": "x"})
    with pytest.raises(TypeError, match="agent_registry: expected an AgentRegistry"):
        RuntimeTopologyDesigner(Designer().agent, {}, [])  # type: ignore[arg-type]
