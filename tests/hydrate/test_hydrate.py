"""Registries, name checks (F4) and building runtime objects from specs (semantics section 7)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.errors import HydrationError, UnknownNamesError
from core.hydrate import (
    BUILTIN_MERGES,
    AgentRegistry,
    CallableRegistry,
    topology_from_spec,
    validate_names,
)
from core.ir import (
    AgentSpec,
    AgentStepSpec,
    AnyNode,
    FunctionStepSpec,
    ParallelSpec,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoopSpec,
    RouterSpec,
    RouteSpec,
    StepConfigSpec,
    parse_topology,
)
from core.ir.testing import DEFAULT_AGENT_NAMES, DEFAULT_CALLABLE_NAMES, topology_specs
from core.runtime import (
    AgentStep,
    ErrorStrategy,
    FunctionStep,
    Parallel,
    Pipeline,
    RefinementLoop,
    Router,
    Step,
)

models.ALLOW_MODEL_REQUESTS = False


def text_agent(reply: str, name: str | None = None) -> Agent[None, str]:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(reply)])

    return Agent(FunctionModel(respond, model_name=f"{reply}-model"), name=name)


def upper(text: str) -> str:
    """Upper-cases the text."""
    return text.upper()


# --- registries --------------------------------------------------------------------------------


def test_callable_registry_basics() -> None:
    reg = CallableRegistry()
    reg.register("upper", upper)
    reg.register("strip", str.strip, "Strips whitespace.")
    reg.register("anon", lambda x: x)
    assert reg.names() == ["anon", "strip", "upper"]
    assert reg.get("upper") is upper
    assert reg.describe("upper") == "Upper-cases the text."
    assert reg.describe("strip") == "Strips whitespace."
    assert reg.describe("anon") is None
    assert [name for name, _ in reg.items()] == ["anon", "strip", "upper"]
    assert "upper" in reg and "nope" not in reg and 3 not in reg
    assert len(reg) == 3
    reg.register("upper", str.lower, "Now lower.")
    assert reg.get("upper") is str.lower
    assert reg.describe("upper") == "Now lower."
    assert len(reg) == 3


def test_callable_registry_errors() -> None:
    reg = CallableRegistry()
    reg.register("b", upper)
    reg.register("a", upper)
    with pytest.raises(KeyError) as exc:
        reg.get("zzz")
    assert exc.value.args == ("unknown callable 'zzz'; registered: a, b",)
    with pytest.raises(KeyError):
        reg.describe("zzz")
    for bad_name in ("", "   ", 3, None):
        with pytest.raises(ValueError):
            reg.register(bad_name, upper)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        reg.register("x", "not callable")  # type: ignore[arg-type]
    with pytest.raises(KeyError) as empty:
        CallableRegistry().get("x")
    assert empty.value.args == ("unknown callable 'x'; registered: (none)",)


def test_agent_registry_factories_and_instances() -> None:
    made: list[Agent[None, str]] = []

    def make_solver() -> Agent[None, str]:
        """Solves the task."""
        agent = text_agent("42")
        made.append(agent)
        return agent

    reg = AgentRegistry()
    reg.register("solver", make_solver)
    shared = text_agent("hi")
    reg.register("greeter", shared, "Says hi.")
    assert reg.names() == ["greeter", "solver"]
    first, second = reg.create("solver"), reg.create("solver")
    assert first is not second and made == [first, second]
    assert reg.create("greeter") is shared
    assert reg.describe("solver") == "Solves the task."
    assert reg.describe("greeter") == "Says hi."
    assert reg.get("solver") is make_solver
    with pytest.raises(KeyError) as exc:
        reg.create("nope")
    assert exc.value.args == ("unknown agent 'nope'; registered: greeter, solver",)
    with pytest.raises(TypeError):
        reg.register("x", 42)
    with pytest.raises(ValueError):
        reg.register("", make_solver)


# --- name resolution and F4 --------------------------------------------------------------------


def registries(
    agents: tuple[str, ...] = ("solver", "triage"),
    calls: tuple[str, ...] = ("upper", "is_math", "refine", "judge", "join"),
) -> tuple[CallableRegistry, AgentRegistry]:
    call_reg = CallableRegistry()
    for name in calls:
        call_reg.register(name, upper)
    agent_reg = AgentRegistry()
    for name in agents:
        agent_reg.register(name, lambda name=name: text_agent(name))
    return call_reg, agent_reg


def f4_spec() -> RouterSpec:
    """F4: an unregistered agent inside a router route, an unregistered function in a loop."""
    return RouterSpec(
        routes=[
            RouteSpec(name="math", step=AgentStepSpec(agent_name="solver")),
            RouteSpec(name="code", step=AgentStepSpec(agent_name="coder_x")),
        ],
        classifier="triage",
        fallback_step=RefinementLoopSpec(
            step=FunctionStepSpec(callable_name="draft_fn_x"),
            evaluator="judge",
            state_updater_name="refine",
        ),
    )


def test_f4_every_unknown_name_with_its_path_before_anything_runs() -> None:
    calls, agents = registries()
    created: list[str] = []
    agents.register("solver", lambda: created.append("solver") or text_agent("s"))
    with pytest.raises(UnknownNamesError) as exc:
        topology_from_spec(f4_spec(), callable_registry=calls, agent_registry=agents)
    err = exc.value
    assert err.unknown == [
        ("$.routes[1].step.agent_name", "agent", "coder_x"),
        ("$.fallback_step.step.callable_name", "callable", "draft_fn_x"),
    ]
    assert err.known == {
        "agent": ["solver", "triage"],
        "callable": ["is_math", "join", "judge", "refine", "upper"],
        "merge": ["collect_all", "fastest", "first_wins"],
    }
    assert str(err) == (
        "2 unknown name(s) in spec:\n"
        "  $.routes[1].step.agent_name: unknown agent 'coder_x'\n"
        "  $.fallback_step.step.callable_name: unknown callable 'draft_fn_x'\n"
        "known names: agent: solver, triage; callable: is_math, join, judge, refine, upper; "
        "merge: collect_all, fastest, first_wins"
    )
    assert created == []  # nothing was built


def test_validate_names_every_kind_in_document_order() -> None:
    spec = parse_topology(
        {
            "kind": "pipeline",
            "steps": [
                {
                    "operation": {
                        "kind": "parallel",
                        "steps": [{"kind": "agent_step", "agent_name": "a_x"}],
                        "merge": "merge_x",
                    }
                },
                {
                    "operation": {
                        "kind": "router",
                        "routes": [
                            {
                                "name": "r",
                                "step": {"kind": "function_step", "callable_name": "f_x"},
                                "condition_name": "cond_x",
                            }
                        ],
                        "classifier": "clf_x",
                    }
                },
                {
                    "operation": {
                        "kind": "refinement_loop",
                        "step": {"kind": "agent_step", "agent_name": "solver"},
                        "evaluator": "eval_x",
                        "state_updater_name": "upd_x",
                    }
                },
            ],
        }
    )
    calls, agents = registries()
    assert validate_names(spec, callable_registry=calls, agent_registry=agents) == [
        ("$.steps[0].operation.steps[0].agent_name", "agent", "a_x"),
        ("$.steps[0].operation.merge", "merge", "merge_x"),
        ("$.steps[1].operation.routes[0].step.callable_name", "callable", "f_x"),
        ("$.steps[1].operation.routes[0].condition_name", "callable", "cond_x"),
        ("$.steps[1].operation.classifier", "agent_or_callable", "clf_x"),
        ("$.steps[2].operation.evaluator", "agent_or_callable", "eval_x"),
        ("$.steps[2].operation.state_updater_name", "callable", "upd_x"),
    ]
    assert validate_names(f4_spec(), callable_registry=calls, agent_registry=agents) == [
        ("$.routes[1].step.agent_name", "agent", "coder_x"),
        ("$.fallback_step.step.callable_name", "callable", "draft_fn_x"),
    ]


def test_merge_builtins_first_then_callables() -> None:
    calls = CallableRegistry()
    calls.register("first_wins", lambda outs: "shadowed")
    calls.register("join", lambda outs: "+".join(outs))
    agents = AgentRegistry()
    steps = [FunctionStepSpec(callable_name="a"), FunctionStepSpec(callable_name="b")]
    calls.register("a", lambda x: x + "a")
    calls.register("b", lambda x: x + "b")
    builtin = topology_from_spec(
        ParallelSpec(steps=steps, merge="first_wins"),
        callable_registry=calls,
        agent_registry=agents,
    )
    custom = topology_from_spec(
        ParallelSpec(steps=steps, merge="join"), callable_registry=calls, agent_registry=agents
    )
    assert asyncio.run(builtin.execute("x")) == "xa"
    assert asyncio.run(custom.execute("x")) == "xa+xb"
    assert BUILTIN_MERGES == ("collect_all", "first_wins", "fastest")


def test_string_classifier_and_evaluator_agent_registry_first() -> None:
    calls = CallableRegistry()
    calls.register("pick", lambda x: "callable-route")
    calls.register("update", lambda inp, out, ev: inp)
    calls.register("grade", lambda out: {"passed": True, "score": 1.0})
    agents = AgentRegistry()
    agents.register("pick", lambda: text_agent("agent-route"))
    agents.register("leaf", lambda: text_agent("leaf"))
    router = RouterSpec(
        routes=[
            RouteSpec(name="agent-route", step=FunctionStepSpec(callable_name="update")),
            RouteSpec(name="callable-route", step=AgentStepSpec(agent_name="leaf")),
        ],
        classifier="pick",
    )
    built = topology_from_spec(router, callable_registry=calls, agent_registry=agents)
    assert isinstance(built, Router) and isinstance(built.classifier, AgentStep)
    only_callable = AgentRegistry()
    only_callable.register("leaf", lambda: text_agent("leaf"))
    built2 = topology_from_spec(router, callable_registry=calls, agent_registry=only_callable)
    assert isinstance(built2, Router) and isinstance(built2.classifier, FunctionStep)
    assert asyncio.run(built2.execute("q")) == "leaf"
    loop = RefinementLoopSpec(
        step=AgentStepSpec(agent_name="leaf"), evaluator="grade", state_updater_name="update"
    )
    built_loop = topology_from_spec(loop, callable_registry=calls, agent_registry=agents)
    assert isinstance(built_loop, RefinementLoop)
    assert isinstance(built_loop.evaluator, FunctionStep)
    assert asyncio.run(built_loop.execute("q")) == "leaf"


# --- building ------------------------------------------------------------------------------------


def test_built_objects_carry_ids_names_and_settings() -> None:
    calls, agents = registries()
    spec = PipelineSpec(
        id="p",
        name="main",
        steps=[
            PipelineStepEntry(
                operation=FunctionStepSpec(callable_name="upper", id="f"),
                config=StepConfigSpec(name="shout", on_error="retry", max_retries=2),
            ),
            PipelineStepEntry(
                operation=ParallelSpec(
                    id="par",
                    steps=[AgentStepSpec(agent_name="solver", id="a")],
                    timeout=2.5,
                    name="fan",
                )
            ),
            PipelineStepEntry(operation=FunctionStepSpec(callable_name="refine", name="again")),
        ],
    )
    calls.register("refine", lambda x: x)
    built = topology_from_spec(spec, callable_registry=calls, agent_registry=agents)
    assert isinstance(built, Pipeline)
    assert (built.step_name, built.node_id) == ("main", "p")
    first, par, third = built.steps
    assert isinstance(first, FunctionStep) and (first.step_name, first.node_id) == ("upper", "f")
    assert first.fn is upper
    assert isinstance(par, Parallel) and (par.step_name, par.node_id, par.timeout) == (
        "fan",
        "par",
        2.5,
    )
    agent_step = par.steps[0]
    assert isinstance(agent_step, AgentStep) and (agent_step.step_name, agent_step.node_id) == (
        "solver",
        "a",
    )
    assert isinstance(third, FunctionStep) and (third.step_name, third.node_id) == ("again", None)
    entry = built._entries[0]  # the config reached the runtime
    assert (entry.name, entry.on_error, entry.attempts) == ("shout", ErrorStrategy.RETRY, 3)
    assert asyncio.run(built.execute("abc")) == ["solver"]


def test_inline_agents_refused_unless_allowed_with_a_factory() -> None:
    calls, agents = registries()
    inline = AgentSpec(
        model="test:model", system_prompt="be brief", name="brief", output_schema={"type": "string"}
    )
    spec = RouterSpec(
        routes=[RouteSpec(name="a", step=AgentStepSpec(inline_spec=inline))],
        classifier=AgentSpec(name="clf", model="test:model", output_schema={"type": "string"}),
    )
    with pytest.raises(HydrationError) as refused:
        topology_from_spec(spec, callable_registry=calls, agent_registry=agents)
    assert str(refused.value) == (
        "inline agent definitions are not allowed (pass allow_inline_agents=True and an "
        "agent_factory to allow them); found at: $.routes[0].step.inline_spec, $.classifier"
    )
    with pytest.raises(HydrationError) as no_factory:
        topology_from_spec(
            spec, callable_registry=calls, agent_registry=agents, allow_inline_agents=True
        )
    assert "allow_inline_agents=True needs an agent_factory" in str(no_factory.value)
    seen: list[AgentSpec] = []

    def factory(agent_spec: AgentSpec) -> Agent[None, str]:
        seen.append(agent_spec)
        return text_agent("a")

    with pytest.raises(HydrationError):
        topology_from_spec(
            spec, callable_registry=calls, agent_registry=agents, agent_factory=factory
        )
    built = topology_from_spec(
        spec,
        callable_registry=calls,
        agent_registry=agents,
        agent_factory=factory,
        allow_inline_agents=True,
    )
    assert isinstance(built, Router)
    assert seen == [inline, spec.classifier]  # built bottom-up: the route's agent first
    assert asyncio.run(built.execute("q")) == "a"
    assert built.routes[0].step.step_name == "brief"


def test_factory_failures_name_the_path() -> None:
    calls, agents = registries()

    def broken() -> Any:
        raise RuntimeError("no key")

    agents.register("broken", broken)
    agents.register("not_agent", lambda: "a string")
    spec = PipelineSpec(
        steps=[
            PipelineStepEntry(operation=FunctionStepSpec(callable_name="upper")),
            PipelineStepEntry(operation=AgentStepSpec(agent_name="broken")),
        ]
    )
    with pytest.raises(HydrationError) as exc:
        topology_from_spec(spec, callable_registry=calls, agent_registry=agents)
    assert str(exc.value) == (
        "the factory of agent 'broken' (at $.steps[1].operation.agent_name) raised "
        "RuntimeError: no key"
    )
    assert isinstance(exc.value.__cause__, RuntimeError)
    with pytest.raises(HydrationError) as wrong:
        topology_from_spec(
            AgentStepSpec(agent_name="not_agent"), callable_registry=calls, agent_registry=agents
        )
    assert str(wrong.value) == (
        "the factory of agent 'not_agent' (at $.agent_name) returned a str, not an agent"
    )


# --- every valid spec hydrates ------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(topology_specs(inline_agents=True, ids="all"))
def test_every_random_valid_spec_hydrates(spec: AnyNode) -> None:
    calls = CallableRegistry()
    for name in DEFAULT_CALLABLE_NAMES:
        calls.register(name, lambda *args: args[0])
    agents = AgentRegistry()
    for name in DEFAULT_AGENT_NAMES:
        agents.register(name, lambda name=name: text_agent(name))
    assert validate_names(spec, callable_registry=calls, agent_registry=agents) == []
    built = topology_from_spec(
        spec,
        callable_registry=calls,
        agent_registry=agents,
        agent_factory=lambda agent_spec: text_agent("inline"),
        allow_inline_agents=True,
    )
    assert isinstance(built, Step)
    assert built.node_id == spec.id  # type: ignore[attr-defined]
