"""topology-optimization-api.txt: each documented class, function and source excerpt, with
`from core import ...`, run on function models."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError
from reference_fakes import ScriptedDesigner, answering, pipeline_of

from core import (
    AgentStepSpec,
    Archive,
    ArchiveEntry,
    CallableRegistry,
    FunctionStepSpec,
    GoldExample,
    LoopResult,
    MetaAgentConfig,
    MetaAgentSearch,
    MetricBundle,
    MetricWeights,
    OperationSpec,
    OptimizationResult,
    Parallel,
    ParallelResult,
    ParallelSpec,
    Pipeline,
    PipelineSpec,
    PipelineStepEntry,
    RefinementLoop,
    RefinementLoopSpec,
    Router,
    RouterSpec,
    RouteSpec,
    SearchError,
    StepConfigSpec,
    TopologyDesign,
    TopologyEvaluator,
    TopologyGene,
    TopologySpec,
    parallel_from_spec,
    pipeline_from_spec,
    refinement_loop_from_spec,
    router_from_spec,
    topology_from_spec,
    unpack_topology_output,
)

# --- spec ---------------------------------------------------------------------------------------


def test_operation_spec_and_topology_spec_unions() -> None:
    nested = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "agent_step", "agent_name": "cot"}},
            {
                "operation": {
                    "kind": "parallel",
                    "steps": [{"kind": "function_step", "callable_name": "f"}],
                }
            },
        ],
    }
    top = TypeAdapter(TopologySpec).validate_python(nested)
    assert isinstance(top, PipelineSpec)
    assert isinstance(top.steps[1].operation, ParallelSpec)
    step = TypeAdapter(OperationSpec).validate_python({"kind": "agent_step", "agent_name": "cot"})
    assert step == AgentStepSpec(agent_name="cot")
    with pytest.raises(ValidationError):  # an atomic step alone is not a topology
        TypeAdapter(TopologySpec).validate_python({"kind": "agent_step", "agent_name": "cot"})


def test_spec_models_fields_and_validation() -> None:
    assert StepConfigSpec(on_error="retry", max_retries=2).on_error == "retry"
    with pytest.raises(ValidationError):  # exactly one of agent_name / inline_spec
        AgentStepSpec()
    assert FunctionStepSpec(callable_name="f").name is None
    with pytest.raises(ValidationError):  # at least one step
        PipelineSpec(steps=[])
    par = ParallelSpec(steps=[FunctionStepSpec(callable_name="f")])
    assert (par.merge, par.timeout) == ("collect_all", None)
    route = RouteSpec(name="r", step=FunctionStepSpec(callable_name="f"))
    assert route.condition_name is None
    with pytest.raises(ValidationError):  # a classifier or a condition is needed
        RouterSpec(routes=[route])
    router = RouterSpec(routes=[route], classifier="triage")
    assert router.fallback_step is None
    loop = RefinementLoopSpec(
        step=FunctionStepSpec(callable_name="f"), evaluator="judge", state_updater_name="upd"
    )
    assert (loop.max_iterations, loop.convergence_threshold, loop.keep_best) == (5, 0.01, True)
    text = loop.model_dump_json()
    assert TypeAdapter(TopologySpec).validate_json(text) == loop


# --- hydrate ------------------------------------------------------------------------------------


def test_callable_registry_register_get_names() -> None:
    registry = CallableRegistry()
    registry.register("b_fn", str.upper)
    registry.register("a_fn", str.lower)
    registry.register("a_fn", str.title)  # re-registering replaces silently
    assert registry.names() == ["a_fn", "b_fn"]
    assert registry.get("a_fn") is str.title
    with pytest.raises(ValueError):
        registry.register("", str.upper)
    with pytest.raises(TypeError):
        registry.register("x", "not callable")  # type: ignore[arg-type]
    with pytest.raises(KeyError) as missing:
        registry.get("nope")
    assert "'nope'" in str(missing.value) and "a_fn, b_fn" in str(missing.value)


def _registries() -> tuple[CallableRegistry, dict[str, Any]]:
    calls = CallableRegistry()
    calls.register("exclaim", lambda s: f"{s}!")
    calls.register("is_question", lambda s: s.endswith("?"))
    calls.register("join", lambda outs: " & ".join(outs))
    calls.register("pick_upper", lambda s: "upper")
    calls.register("again", lambda current, output, result: output)
    calls.register("long_enough", lambda output: {"passed": len(output) > 6, "score": 0.5})
    agents = {"upper": lambda: answering(str.upper), "lower": lambda: answering(str.lower)}
    return calls, agents


def test_pipeline_from_spec_with_a_dict_agent_registry() -> None:
    calls, agents = _registries()
    spec = PipelineSpec(
        steps=[
            PipelineStepEntry(operation=AgentStepSpec(agent_name="upper")),
            PipelineStepEntry(
                operation=FunctionStepSpec(callable_name="exclaim"),
                config=StepConfigSpec(name="shout", on_error="skip"),
            ),
        ]
    )
    pipeline = pipeline_from_spec(spec, callable_registry=calls, agent_registry=agents)
    assert isinstance(pipeline, Pipeline)
    assert asyncio.run(pipeline.run("hi")) == "HI!"


def test_parallel_from_spec_builtin_and_registered_merges() -> None:
    calls, agents = _registries()
    steps = [AgentStepSpec(agent_name="upper"), AgentStepSpec(agent_name="lower")]
    builtin = parallel_from_spec(
        ParallelSpec(steps=steps), callable_registry=calls, agent_registry=agents
    )
    assert isinstance(builtin, Parallel)
    assert asyncio.run(builtin.run("Hi")).merged == ["HI", "hi"]
    custom = parallel_from_spec(
        ParallelSpec(steps=steps, merge="join", timeout=5.0),
        callable_registry=calls,
        agent_registry=agents,
    )
    assert asyncio.run(custom.run("Hi")).merged == "HI & hi"


def test_router_from_spec_classifier_by_agent_then_callable_name() -> None:
    calls, agents = _registries()
    routes = [
        RouteSpec(name="upper", step=AgentStepSpec(agent_name="upper")),
        RouteSpec(
            name="lower",
            step=AgentStepSpec(agent_name="lower"),
            condition_name="is_question",
        ),
    ]
    by_callable = router_from_spec(
        RouterSpec(routes=routes, classifier="pick_upper"),
        callable_registry=calls,
        agent_registry=agents,
    )
    assert isinstance(by_callable, Router)
    assert asyncio.run(by_callable.run("Hi?")) == "HI?"  # the classifier alone chooses
    by_rule = router_from_spec(
        RouterSpec(routes=routes, fallback_step=FunctionStepSpec(callable_name="exclaim")),
        callable_registry=calls,
        agent_registry=agents,
    )
    assert asyncio.run(by_rule.run("Hi?")) == "hi?"
    assert asyncio.run(by_rule.run("Hi")) == "Hi!"  # no condition matched: the fallback


def test_refinement_loop_from_spec_with_a_callable_evaluator() -> None:
    calls, agents = _registries()
    spec = RefinementLoopSpec(
        step=FunctionStepSpec(callable_name="exclaim"),
        evaluator="long_enough",
        state_updater_name="again",
        max_iterations=4,
    )
    loop = refinement_loop_from_spec(spec, callable_registry=calls, agent_registry=agents)
    assert isinstance(loop, RefinementLoop)
    result = asyncio.run(loop.run("abcd"))
    assert (result.exit_reason, result.iterations, result.output) == ("passed", 3, "abcd!!!")


def test_topology_from_spec_dispatches_on_kind_and_refuses_unknown_names() -> None:
    calls, agents = _registries()
    built = topology_from_spec(
        TypeAdapter(TopologySpec).validate_python(pipeline_of("exclaim", "exclaim")),
        callable_registry=calls,
        agent_registry=agents,
    )
    assert isinstance(built, Pipeline) and asyncio.run(built.run("a")) == "a!!"
    with pytest.raises(KeyError) as unknown:  # "unknown names raise KeyError at hydration"
        topology_from_spec(
            PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="cot"))]),
            callable_registry=calls,
            agent_registry=agents,
        )
    assert "$.steps[0].operation.agent_name: unknown agent 'cot'" in str(unknown.value)
    with pytest.raises(TypeError, match="pipeline_from_spec takes a PipelineSpec"):
        pipeline_from_spec(
            ParallelSpec(steps=[FunctionStepSpec(callable_name="exclaim")]),  # type: ignore[arg-type]
            callable_registry=calls,
            agent_registry=agents,
        )


# --- topology -----------------------------------------------------------------------------------

SEED = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="upper"))])


def test_topology_gene_encode_decode_is_resilient() -> None:
    gene = TopologyGene(name="main", initial=SEED, constraints="keep it short")
    assert (gene.allowed_step_kinds, gene.max_depth) == (("agent_step", "function_step"), 4)
    assert gene.encode() == SEED.model_dump_json()
    other = TypeAdapter(TopologySpec).validate_python(pipeline_of("exclaim"))
    assert gene.decode(other.model_dump_json()) == other
    assert gene.decode(None) is SEED  # key missing
    assert gene.decode("{not json") is SEED  # malformed JSON
    assert gene.decode('{"kind": "pipeline", "steps": []}') is SEED  # fails the schema


def _score(output: Any, example: GoldExample[Any, Any]) -> float:
    return 1.0 if output == example.expected else 0.0


def test_topology_evaluator_evaluate_one_and_batch() -> None:
    calls, agents = _registries()
    evaluator = TopologyEvaluator(
        score_fn=_score,
        callable_registry=calls,
        agent_registry=agents,
        topology_gene_name="main",
        timer=lambda: 0.0,
    )
    example = GoldExample[str, str](input="hi", expected="HI", id="e1")
    bundle = asyncio.run(evaluator.evaluate_one({"main": SEED}, example))
    assert isinstance(bundle, MetricBundle)
    assert (bundle.accuracy, bundle.cost_usd, bundle.latency_ms) == (1.0, 0.0, 0.0)
    assert bundle.raw == {"n_agents": 1, "depth": 1, "cost_source": "measured"}
    batch = [example, GoldExample(input="yo", expected="no", id="e2")]
    bundles = asyncio.run(evaluator.evaluate_batch(decoded={"main": SEED}, batch=batch))
    assert [b.accuracy for b in bundles] == [1.0, 0.0]


def test_topology_evaluator_failures_are_zero_accuracy_bundles() -> None:
    calls, agents = _registries()
    evaluator = TopologyEvaluator(score_fn=_score, callable_registry=calls, agent_registry=agents)
    example = GoldExample(input="hi", expected="HI", id="e1")
    missing = asyncio.run(evaluator.evaluate_one({}, example))
    assert (missing.accuracy, missing.raw["error_type"]) == (0.0, "MissingGene")
    assert missing.raw["error"] == "the decoded genome has no gene 'main' (genes: (none))"
    unknown = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="cot"))])
    refused = asyncio.run(evaluator.evaluate_one({"main": unknown}, example))
    assert (refused.accuracy, refused.raw["error_type"]) == (0.0, "unknown_names")
    assert (refused.raw["n_agents"], refused.raw["depth"]) == (1, 1)

    def boom(text: str) -> str:
        raise RuntimeError("broken step")

    calls.register("boom", boom)
    spec = TypeAdapter(TopologySpec).validate_python(pipeline_of("boom"))
    raised = asyncio.run(evaluator.evaluate_one({"main": spec}, example))
    assert (raised.accuracy, raised.status, raised.raw["error_type"]) == (
        0.0,
        "error",
        "PipelineStepError",
    )
    assert "broken step" in raised.raw["error"]


def test_unpack_topology_output() -> None:
    assert unpack_topology_output(ParallelResult(["a"], [None], ["a"])) == ["a"]
    loop_result = LoopResult(
        output="final",
        iterations=1,
        exit_reason="passed",
        history=[],
        best_iteration=1,
        best_score=None,
        returned_iteration=1,
    )
    assert unpack_topology_output(loop_result) == "final"

    class RunResult:
        output = "from .output"

    assert unpack_topology_output(RunResult()) == "from .output"
    assert unpack_topology_output("plain") == "plain"


# --- meta_agent ---------------------------------------------------------------------------------


def test_meta_agent_config_defaults_and_dataclass_replace() -> None:
    config = MetaAgentConfig()
    assert (
        config.n_generations,
        config.archive_strategy,
        config.archive_size,
        config.reflexion_passes,
        config.debug_max,
        config.minibatch_size,
        config.seed,
        config.weights,
    ) == (10, "top_k", 5, 2, 3, 5, 42, MetricWeights())
    shorter = dataclasses.replace(config, n_generations=3)
    assert (shorter.n_generations, config.n_generations) == (3, 10)
    assert config.replace(archive_strategy="cumulative").archive_strategy == "cumulative"
    with pytest.raises(ValidationError):  # values are checked
        dataclasses.replace(config, archive_size=0)


def _entry(
    gen: int, names: tuple[str, ...], accuracy: float, cost: float, **kw: Any
) -> ArchiveEntry:
    bundles = [MetricBundle(accuracy=accuracy, cost_usd=cost)]
    return ArchiveEntry(
        generation=gen,
        spec_json=json.dumps(pipeline_of(*names)),
        bundles=bundles,
        aggregate_score=accuracy - 10 * cost,
        **kw,
    )


def test_archive_entry_and_topology_design_fields() -> None:
    entry = _entry(-1, ("f",), 0.5, 0.0)
    assert (entry.generation, entry.thought, entry.parent_idx) == (-1, "", None)
    assert entry.spec == TypeAdapter(TopologySpec).validate_python(pipeline_of("f"))
    design = TopologyDesign(thought="add a check", spec=entry.spec)
    assert design.spec == entry.spec
    with pytest.raises(ValidationError):  # malformed candidates fail fast
        TopologyDesign.model_validate({"thought": "x", "spec": {"kind": "pipeline"}})


def test_archive_init_add_entries() -> None:
    with pytest.raises(ValueError):
        Archive("best")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Archive(size=0)
    archive = Archive()
    assert archive.add(_entry(-1, ("a",), 0.5, 0.0)) == 0
    assert archive.add(_entry(0, ("b",), 0.75, 0.0)) == 1
    assert [e.generation for e in archive.entries] == [-1, 0]


def test_archive_serialize_for_prompt_by_strategy() -> None:
    def filled(strategy: Any) -> Archive:
        archive = Archive(strategy, size=2)
        for gen, name, acc in [(-1, "a", 0.25), (0, "b", 0.75), (1, "c", 0.5)]:
            archive.add(_entry(gen, (name,), acc, 0.0, thought=f"t{gen}"))
        return archive

    def shown(strategy: Any) -> list[tuple[int, float]]:
        text = filled(strategy).serialize_for_prompt()
        rows = [json.loads(line.rstrip(",")) for line in text.split(",\n")] if text else []
        return [(r["generation"], r["score"]) for r in rows]

    assert shown("top_k") == [(0, 0.75), (1, 0.5)]  # best first, `size` of them
    assert shown("cumulative") == [(-1, 0.25), (0, 0.75), (1, 0.5)]  # every entry
    assert shown("parallel") == [(0, 0.75), (1, 0.5)]  # deliberately: the latest batch
    first = json.loads(filled("cumulative").serialize_for_prompt().split(",\n")[0])
    assert (first["thought"], first["spec"]) == ("t-1", pipeline_of("a"))


def test_archive_best_and_pareto() -> None:
    archive = Archive()
    with pytest.raises(ValueError, match="empty"):
        archive.best()
    archive.add(_entry(-1, ("a",), 0.5, 0.0))  # cheap
    archive.add(_entry(0, ("b",), 0.75, 0.01))  # better and dearer
    archive.add(_entry(1, ("c",), 0.5, 0.02))  # dominated by the seed
    best = archive.best()
    assert best is not None and best.generation == 0
    assert [e.generation for e in archive.pareto()] == [-1, 0]


GOLD = [
    GoldExample(input="hi", expected="HI!", id="g1"),
    GoldExample(input="yo", expected="YO!", id="g2"),
]
WINNER = {
    "kind": "pipeline",
    "steps": [
        {"operation": {"kind": "agent_step", "agent_name": "upper"}},
        {"operation": {"kind": "function_step", "callable_name": "exclaim"}},
    ],
}


def test_meta_agent_search_constructor_and_run() -> None:
    calls, agents = _registries()
    designer = ScriptedDesigner([{"thought": "shout after", "spec": WINNER}])
    events: list[Any] = []
    search = MetaAgentSearch(
        MetaAgentConfig(n_generations=2, reflexion_passes=1, minibatch_size=2),
        gene=TopologyGene(name="main", initial=SEED),
        evaluator=TopologyEvaluator(
            score_fn=_score, callable_registry=calls, agent_registry=agents, timer=lambda: 0.0
        ),
        meta_agent_model=designer.model(),
        bus=events.append,
    )
    result = asyncio.run(search.run(trainset=GOLD, valset=GOLD))
    assert isinstance(result, OptimizationResult)
    winner = TypeAdapter(TopologySpec).validate_python(WINNER)
    assert result.best_decoded == {"main": winner}
    assert result.best_candidate == {"main": winner.model_dump_json()}
    assert result.best_score == 1.0
    assert result.pareto_candidates == [{"main": winner.model_dump_json()}]
    assert [r.status for r in result.history] == ["evaluated", "evaluated", "duplicate"]
    assert designer.calls == 4  # 2 generations x (design + 1 reflexion)
    assert [(e.event_type, e.data["status"]) for e in events] == [
        ("meta_agent.iteration_completed", "evaluated"),
        ("meta_agent.iteration_completed", "duplicate"),
    ]
    with pytest.raises(ValueError, match="trainset"):
        asyncio.run(search.run(trainset=[]))


def test_meta_agent_search_publishes_on_an_event_bus() -> None:
    from core import EventBus

    calls, agents = _registries()
    bus = EventBus()
    seen: list[tuple[str, Any]] = []
    bus.subscribe("meta_agent.*", lambda event: seen.append((event.topic, event.payload)))
    search = MetaAgentSearch(
        MetaAgentConfig(n_generations=1, reflexion_passes=0, minibatch_size=2),
        gene=TopologyGene(name="main", initial=SEED),
        evaluator=TopologyEvaluator(
            score_fn=_score, callable_registry=calls, agent_registry=agents, timer=lambda: 0.0
        ),
        meta_agent_model=ScriptedDesigner([{"thought": "t", "spec": WINNER}]).model(),
        bus=bus,
    )
    asyncio.run(search.run(trainset=GOLD))
    assert seen == [
        (
            "meta_agent.iteration_completed",
            {
                "generation": 0,
                "candidate_idx": 1,
                "status": "evaluated",
                "score": 1.0,
                "split": "validation",
                "reason": None,
            },
        )
    ]


def test_meta_agent_search_api_key_goes_to_the_provider_only() -> None:
    search = MetaAgentSearch(
        MetaAgentConfig(),
        gene=TopologyGene(name="main", initial=SEED),
        meta_agent_model="openai:gpt-4.1",
        api_key="sk-reference-test-key",
    )
    assert search.model_name == "openai:gpt-4.1"
    assert search.model.client.api_key == "sk-reference-test-key"  # type: ignore[union-attr]
    stored = {k: v for k, v in vars(search).items() if k != "model"}
    assert "sk-reference-test-key" not in repr(stored)
    assert "sk-reference-test-key" not in repr(search.model)
    with pytest.raises(SearchError, match="model= or meta_agent_model="):
        MetaAgentSearch(MetaAgentConfig())
