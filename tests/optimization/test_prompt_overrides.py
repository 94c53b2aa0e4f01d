"""Prompt overrides reach the agent (registered agents, BaseAgents, inline AgentSpecs), a bad
target is refused with a clear error, and the evaluator keeps differently-prompted runs apart."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.agents import BaseAgent
from core.agents.overrides import PromptOverrideAgent, override_system_prompt
from core.autonomy import AgentFactory
from core.errors import HydrationError
from core.evaluation import GoldExample, InMemoryEvaluationCache, TopologyEvaluator
from core.evaluation.evaluator import prompted_hash
from core.hydrate import AgentRegistry, CallableRegistry, agents_in, topology_from_spec
from core.ir import AgentSpec, parse_topology

models.ALLOW_MODEL_REQUESTS = False


class Recorder:
    """A FunctionModel that records the instructions and system prompts of every request and
    answers `"ok"`, or `"Answer: 4"` when its instructions ask for an answer line."""

    def __init__(self) -> None:
        self.seen: list[tuple[str | None, list[str]]] = []
        self.model = FunctionModel(self._respond, model_name="recorder")

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        system = [
            part.content
            for m in messages
            if isinstance(m, ModelRequest)
            for part in m.parts
            if isinstance(part, SystemPromptPart)
        ]
        self.seen.append((info.instructions, system))
        answer = "Answer: 4" if "Answer:" in (info.instructions or "") else "ok"
        return ModelResponse(parts=[TextPart(answer)])


def _one_step(agent: str | AgentSpec) -> Any:
    step: dict[str, Any] = (
        {"kind": "agent_step", "agent_name": agent}
        if isinstance(agent, str)
        else {"kind": "agent_step", "inline_spec": agent.model_dump(mode="json")}
    )
    return parse_topology({"kind": "pipeline", "steps": [{"operation": step}]})


def _run(topology: Any, text: str = "2+2?") -> Any:
    return asyncio.run(topology.execute(text))


def test_override_reaches_a_registered_pydantic_ai_agent() -> None:
    rec = Recorder()
    shared = Agent(rec.model, instructions="Be brief.", name="solver")
    agents = AgentRegistry()
    agents.register("solver", shared, "Solves.")
    spec = _one_step("solver")
    plain = topology_from_spec(spec, callable_registry=CallableRegistry(), agent_registry=agents)
    assert _run(plain) == "ok"
    overridden = topology_from_spec(
        spec,
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        prompt_overrides={"solver.system_prompt": "End with a line 'Answer: <n>'."},
    )
    assert _run(overridden) == "Answer: 4"
    assert _run(plain) == "ok"  # the shared registered agent was not changed
    assert rec.seen == [
        ("Be brief.", []),
        ("End with a line 'Answer: <n>'.", []),
        ("Be brief.", []),
    ]


def test_override_reaches_a_base_agent() -> None:
    rec = Recorder()
    agents = AgentRegistry()
    agents.register(
        "solver",
        lambda: BaseAgent("solver", model=rec.model, system_prompt="Be brief."),
    )
    topo = topology_from_spec(
        _one_step("solver"),
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        prompt_overrides={"solver.system_prompt": "Reply 'Answer: <n>'."},
    )
    assert _run(topo) == "Answer: 4"
    assert rec.seen == [("Reply 'Answer: <n>'.", [])]


def test_override_reaches_an_inline_agent_spec() -> None:
    rec = Recorder()
    factory = AgentFactory(default_model=rec.model)
    inline = AgentSpec(name="solver", system_prompt="Be brief.", output_schema={"type": "string"})
    spec = _one_step(inline)
    kwargs: dict[str, Any] = {
        "callable_registry": CallableRegistry(),
        "agent_registry": AgentRegistry(),
        "agent_factory": factory,
        "allow_inline_agents": True,
    }
    assert _run(topology_from_spec(spec, **kwargs)) == "ok"
    topo = topology_from_spec(
        spec, prompt_overrides={"solver.system_prompt": "Give 'Answer: <n>'."}, **kwargs
    )
    assert _run(topo) == "Answer: 4"
    prompts = [instructions or " ".join(system) for instructions, system in rec.seen]
    assert prompts == ["Be brief.", "Give 'Answer: <n>'."]
    assert inline.system_prompt == "Be brief."  # the spec itself is unchanged


def test_bad_override_targets_are_refused_by_name() -> None:
    agents = AgentRegistry()
    agents.register("solver", Agent(Recorder().model, name="solver"))
    spec = _one_step("solver")

    def hydrate(overrides: dict[str, Any]) -> str:
        with pytest.raises(HydrationError) as exc:
            topology_from_spec(
                spec,
                callable_registry=CallableRegistry(),
                agent_registry=agents,
                prompt_overrides=overrides,
            )
        return str(exc.value)

    assert hydrate({"planner.system_prompt": "x"}) == (
        "prompt_overrides: 'planner.system_prompt' names agent 'planner', which this topology "
        "does not run (its agents: solver)"
    )
    assert hydrate({"solver.temperature": "x"}) == (
        "prompt_overrides: prompt target 'solver.temperature' is not of the form "
        "'<agent>.system_prompt'"
    )
    assert hydrate({"solver.system_prompt": 3}) == (
        "prompt_overrides: 'solver.system_prompt' must be a str, got int"
    )


class _Quacks:
    """An AgentLike with no pydantic-ai underneath: no prompt to override."""

    model = "test:quack"

    async def run(self, prompt: Any, /, **kwargs: Any) -> Any:  # pragma: no cover
        raise AssertionError("never run")


def test_an_agent_without_a_prompt_cannot_be_overridden() -> None:
    agents = AgentRegistry()
    agents.register("quack", _Quacks())
    with pytest.raises(HydrationError) as exc:
        topology_from_spec(
            _one_step("quack"),
            callable_registry=CallableRegistry(),
            agent_registry=agents,
            prompt_overrides={"quack.system_prompt": "x"},
        )
    assert str(exc.value) == (
        "prompt override of agent 'quack': cannot override the system prompt of a _Quacks: only "
        "pydantic-ai agents and BaseAgents have one"
    )


def test_rewrapping_keeps_the_newest_override() -> None:
    inner = Agent(Recorder().model)
    once = override_system_prompt(inner, "a")
    twice = override_system_prompt(once, "b")
    assert isinstance(twice, PromptOverrideAgent)
    assert twice.inner is inner and twice.system_prompt == "b"


def test_agents_in_lists_each_agent_once_in_document_order() -> None:
    spec = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {"operation": {"kind": "agent_step", "agent_name": "solver"}},
                {
                    "operation": {
                        "kind": "agent_step",
                        "inline_spec": {"name": "critic", "output_schema": {"type": "string"}},
                    }
                },
                {"operation": {"kind": "agent_step", "agent_name": "solver"}},
            ],
        }
    )
    assert agents_in(spec) == ["solver", "critic"]


def test_prompted_hash_values() -> None:
    assert prompted_hash("abc", None) == "abc"
    assert prompted_hash("abc", {}) == "abc"
    one = prompted_hash("abc", {"solver.system_prompt": "x"})
    assert one.startswith("abc+p") and len(one) == len("abc+p") + 16
    assert one == prompted_hash("abc", {"solver.system_prompt": "x"})
    assert one != prompted_hash("abc", {"solver.system_prompt": "y"})
    # key order does not matter (canonical JSON)
    assert prompted_hash("h", {"a.system_prompt": "1", "b.system_prompt": "2"}) == prompted_hash(
        "h", {"b.system_prompt": "2", "a.system_prompt": "1"}
    )


def test_evaluator_keeps_differently_prompted_runs_apart_in_its_cache() -> None:
    rec = Recorder()
    agents = AgentRegistry()
    agents.register("solver", Agent(rec.model, instructions="Be brief.", name="solver"))
    cache = InMemoryEvaluationCache()
    evaluator = TopologyEvaluator(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_fn=lambda output, example: 1.0 if output == example.expected else 0.0,
        cache=cache,
    )
    spec = _one_step("solver")
    exs = [GoldExample(input="2+2?", expected="Answer: 4", id="q1")]
    fix = {"solver.system_prompt": "End with 'Answer: <n>'."}

    base = asyncio.run(evaluator.evaluate(spec, exs))
    fixed = asyncio.run(evaluator.evaluate(spec, exs, prompt_overrides=fix))
    again = asyncio.run(evaluator.evaluate(spec, exs, prompt_overrides=fix))
    assert (base.accuracy, fixed.accuracy, again.accuracy) == (0.0, 1.0, 1.0)
    assert fixed.spec_hash == prompted_hash(base.spec_hash, fix) != base.spec_hash
    assert [r.spec_hash for r in fixed.results] == [fixed.spec_hash]
    assert (base.n_cached, fixed.n_cached, again.n_cached) == (0, 0, 1)
    assert sorted(cache.keys()) == sorted([(base.spec_hash, "q1", 0), (fixed.spec_hash, "q1", 0)])
    assert len(rec.seen) == 2  # the third evaluation was a cache hit

    bad = asyncio.run(
        evaluator.evaluate(spec, exs, prompt_overrides={"planner.system_prompt": "x"})
    )
    assert bad.status == "rejected"
    assert bad.reason == (
        "hydration_error: HydrationError: prompt_overrides: 'planner.system_prompt' names agent 'planner', "
        "which this topology does not run (its agents: solver)"
    )
