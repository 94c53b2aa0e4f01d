"""topology-optimization-guide.txt, every code example, with `from core import ...`.

Runtime topology design (`RuntimeTopologyDesigner`, `MemoryStoreCache`, `TopologyOrchestrator`)
runs offline: the designer is a function model answering the winner's design, and
the guide's `LocalMemoryStore` is our `DuckDBMemoryStore`. Two-phase prompt evolution
(`PromptGene`, `OptimizationRunner`, `Evaluator`) runs offline: phase 2's `cot` is a
function model correct only when its prompt asks for upper case, and the reflection model a
function model proposing that.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from reference_fakes import ScriptedDesigner, answering, last_prompt

from core import (
    AgentStepSpec,
    CallableRegistry,
    GoldExample,
    MetaAgentConfig,
    MetaAgentSearch,
    MetricBundle,
    OptimizationResult,
    PipelineSpec,
    PipelineStepEntry,
    TopologyEvaluator,
    TopologyGene,
    TopologySpec,
    apply_result,
)

WINNER = {
    "kind": "pipeline",
    "steps": [
        {"operation": {"kind": "agent_step", "agent_name": "cot"}},
        {"operation": {"kind": "function_step", "callable_name": "abstain_if_off_topic"}},
    ],
}


def score_fn(output: Any, example: GoldExample) -> float:
    return 1.0 if output == example.expected else 0.0


def abstain_if_off_topic(answer: str) -> str:
    return "ABSTAIN" if answer.startswith("WEATHER") else answer


def _world() -> tuple[CallableRegistry, dict[str, Any], list[GoldExample]]:
    callable_registry = CallableRegistry()
    callable_registry.register("abstain_if_off_topic", abstain_if_off_topic)
    agent_registry = {"cot": lambda: answering(str.upper)}
    gold_set = [
        GoldExample(input="two plus two", expected="TWO PLUS TWO", id="q1"),
        GoldExample(input="weather today", expected="ABSTAIN", id="q2"),
    ]
    return callable_registry, agent_registry, gold_set


def _search(designer: ScriptedDesigner) -> MetaAgentSearch:
    callable_registry, agent_registry, _ = _world()
    seed = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="cot"))])
    gene = TopologyGene(
        name="main",
        initial=seed,
        constraints="Must end with an agent capable of abstaining for off-topic inputs.",
    )
    return MetaAgentSearch(
        MetaAgentConfig(n_generations=10, archive_strategy="top_k", archive_size=5),
        gene=gene,
        evaluator=TopologyEvaluator(
            score_fn=score_fn,
            callable_registry=callable_registry,
            agent_registry=agent_registry,
            timer=lambda: 0.0,  # the documented test clock: wall latency 0, so fronts are exact
        ),
        meta_agent_model=designer.model(),  # offline: a function model instead of openai:gpt-4.1
    )


def _run() -> tuple[OptimizationResult, ScriptedDesigner]:
    designer = ScriptedDesigner([{"thought": "abstain at the end", "spec": WINNER}])
    search = _search(designer)
    _, _, gold_set = _world()
    return asyncio.run(search.run(trainset=gold_set)), designer


def test_callable_registry_contract() -> None:
    def custom_merge(outputs: list[Any]) -> Any:
        return outputs[0]

    def state_updater(current: Any, output: Any, result: Any) -> Any:
        return output

    cr = CallableRegistry()
    cr.register("is_long", lambda x: len(str(x)) > 200)
    cr.register("first_wins_priority", custom_merge)
    cr.register("propose_next", state_updater)
    assert cr.names() == ["first_wins_priority", "is_long", "propose_next"]


def test_meta_agent_search_loop() -> None:
    result, designer = _run()
    winner = TypeAdapter(TopologySpec).validate_python(WINNER)
    assert result.best_decoded["main"] == winner
    assert result.pareto_candidates == [{"main": winner.model_dump_json()}]
    statuses = [r.status for r in result.history]
    # deliberately different: a run whose strategy proposes nothing new for 3 generations stops
    # (the reference library would spend the remaining 7 generations on duplicates)
    assert statuses == ["evaluated", "evaluated", "duplicate", "duplicate", "duplicate"]
    assert result.raw["stop_reason"] == (
        "strategy exhausted: nothing new to evaluate for 3 generations "
        "(3 proposals: 3 duplicate, 0 rejected)"
    )
    assert [r.accuracy for r in result.history[:2]] == [0.5, 1.0]
    assert designer.calls == 12  # 4 generations x (design + 2 reflexion passes)


def test_metric_bundle_structural_dimensions() -> None:
    callable_registry, agent_registry, gold_set = _world()
    evaluator = TopologyEvaluator(
        score_fn=score_fn, callable_registry=callable_registry, agent_registry=agent_registry
    )
    winner = TypeAdapter(TopologySpec).validate_python(WINNER)
    bundle = asyncio.run(evaluator.evaluate_one({"main": winner}, gold_set[1]))
    assert (bundle.accuracy, bundle.raw["n_agents"], bundle.raw["depth"]) == (1.0, 1, 1)
    scores = bundle.to_per_instance_scores()
    assert (scores["accuracy"], scores["n_agents"], scores["depth"]) == (1.0, 1.0, 1.0)
    assert isinstance(bundle, MetricBundle) and bundle.cost_usd == 0.0


def test_apply_result_dry_run_then_commit() -> None:
    result, _ = _run()
    seed_topology = PipelineSpec(
        steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="cot"))]
    )
    topology_registry = {"main": seed_topology}
    diffs = apply_result(result, target=topology_registry, dry_run=True)
    changed = [d for d in diffs if d.changed]
    assert [d.gene_name for d in changed] == ["main"]
    assert '"abstain_if_off_topic"' in changed[0].unified  # pretty-printed JSON diff
    assert topology_registry["main"] is seed_topology  # dry run: untouched
    apply_result(result, target=topology_registry, dry_run=False)
    assert topology_registry["main"] == TypeAdapter(TopologySpec).validate_python(WINNER)


def test_seed_library_from_the_search_front() -> None:
    search_result, _ = _run()
    seed_library = [entry.spec for entry in search_result.raw.pareto()]
    assert seed_library == [TypeAdapter(TopologySpec).validate_python(WINNER)]
    persisted = json.dumps([s.model_dump() for s in seed_library])
    assert TypeAdapter(list[TopologySpec]).validate_json(persisted) == seed_library


def test_seed_library_deployed_to_the_runtime_designer() -> None:
    import core

    search_result, _ = _run()
    seed_library = [entry.spec for entry in search_result.raw.pareto()]
    callable_registry, agent_registry, _ = _world()
    winner = json.dumps({"thought": "reuse", "spec": WINNER})
    prompts: list[str] = []
    designer_agent = answering(lambda prompt: prompts.append(prompt) or winner)
    designer = core.RuntimeTopologyDesigner(
        designer_agent=designer_agent,
        callable_registry=callable_registry,
        agent_registry=agent_registry,
        seed_library=seed_library,
        cache=core.InMemoryLRU(),
    )
    orchestrator = core.TopologyOrchestrator(designer)
    result = asyncio.run(orchestrator.execute(goal="weather today"))
    assert result.output == "ABSTAIN"
    # cold design: one design call whose prompt shows the seed library
    assert (result.cache_hit, result.success, len(prompts)) == (False, True, 1)
    assert "Prefer reusing or specialising one of them" in prompts[0]
    assert core.canonical_json(seed_library[0]) in prompts[0]
    # cache hit reuse: the same goal again makes no design call
    again = asyncio.run(orchestrator.execute(goal="weather today"))
    assert (again.output, again.cache_hit, len(prompts)) == ("ABSTAIN", True, 1)
    assert designer.cache.stats == core.CacheStats(hits=1, misses=1, stores=2, decays=0)


def test_memory_store_cache_over_the_memory_store(tmp_path: Any) -> None:
    import core

    # deliberately different: the guide's LocalMemoryStore is core.DuckDBMemoryStore here
    # (memory lives in the run store's DuckDB file, runtime.md decision 5); embedder=None is
    # its offline default, the hashed n-gram embedder
    store = core.DuckDBMemoryStore(str(tmp_path / "topology_cache.db"), embedder=None)
    cache = core.MemoryStoreCache(store, threshold=0.85, namespace="topology_cache")
    spec = TypeAdapter(TopologySpec).validate_python(WINNER)
    asyncio.run(cache.store("weather today", spec, success=True))
    assert asyncio.run(cache.lookup("weather today")) == spec
    (entry,) = cache.entries()
    assert (entry.memory_type, entry.key, entry.reliability) == (
        "semantic",
        "topology_cache:weather today",
        1.0,
    )
    store.close()


def test_online_learning_failure_decay() -> None:
    import core

    callable_registry, _, _ = _world()
    failing = {"on": False}

    def cot_answer(prompt: str) -> str:
        if failing["on"]:
            raise RuntimeError("provider down")
        return prompt.upper()

    designs: list[str] = []
    designer_agent = answering(
        lambda prompt: designs.append(prompt) or json.dumps({"thought": "t", "spec": WINNER})
    )
    store = core.DuckDBMemoryStore(":memory:")
    cache = core.MemoryStoreCache(store, threshold=0.85, min_reliability=0.3)
    designer = core.RuntimeTopologyDesigner(
        designer_agent=designer_agent,
        callable_registry=callable_registry,
        agent_registry={"cot": lambda: answering(cot_answer)},
        cache=cache,
    )
    orchestrator = core.TopologyOrchestrator(designer)
    first = asyncio.run(orchestrator.execute(goal="two plus two"))
    assert (first.output, first.success, first.cache_hit) == ("TWO PLUS TWO", True, False)
    failing["on"] = True
    reliabilities: list[float] = []
    for _ in range(4):
        result = asyncio.run(orchestrator.execute(goal="two plus two"))
        assert (result.success, result.cache_hit) == (False, True)  # reported, never raised
        assert result.error is not None and result.error.endswith("RuntimeError: provider down")
        (entry,) = cache.entries()
        reliabilities.append(round(entry.reliability, 12))
    assert reliabilities == [0.7, 0.49, 0.343, 0.2401]
    # below min_reliability the entry stops surfacing: the next request is designed afresh
    assert asyncio.run(cache.lookup("two plus two")) is None
    failing["on"] = False
    fresh = asyncio.run(orchestrator.execute(goal="two plus two"))
    assert (fresh.cache_hit, fresh.success, len(designs)) == (False, True, 2)
    store.close()


UPPER_FIX = "Answer in upper case."


def _prompted_cot(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Phase 2's `cot`: upper-cases its input only when its instructions ask for upper case."""
    text = last_prompt(messages)
    return ModelResponse(
        parts=[TextPart(text.upper() if UPPER_FIX in (info.instructions or "") else text)]
    )


def _reflection(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"```\nThink step by step. {UPPER_FIX}\n```")])


def test_two_phase_topology_then_prompts() -> None:
    import core

    topology_result, _ = _run()
    winning_topology = topology_result.best_decoded["main"]
    callable_registry, _, gold_set = _world()
    cot = Agent(FunctionModel(_prompted_cot, model_name="cot-fn"), name="cot")
    prompt_genes = [core.PromptGene(name="cot.system_prompt", initial="Think step by step.")]
    prompt_runner = core.OptimizationRunner(
        core.OptimizationConfig(max_metric_calls=8, reflection_minibatch_size=2),
        genome=core.Genome(genes=prompt_genes),
        evaluator=core.Evaluator(
            agent_factory=lambda: winning_topology,
            score_fn=score_fn,
            # our topologies name their agents and functions: the factory's spec needs these
            callable_registry=callable_registry,
            agent_registry={"cot": lambda: cot},
            timer=lambda: 0.0,  # phase 1's test clock: both best_scores are aggregate scores
        ),
        reflection_model=FunctionModel(_reflection, model_name="reflect-fn"),  # offline
        api_key="unused",
    )
    final_result = asyncio.run(prompt_runner.optimize(trainset=gold_set))
    assert final_result.best_decoded == {"cot.system_prompt": f"Think step by step. {UPPER_FIX}"}
    assert (final_result.raw["start_accuracy"], final_result.raw["end_accuracy"]) == (0.0, 1.0)
    assert final_result.best_score >= topology_result.best_score
