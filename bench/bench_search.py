"""Search engine benchmarks (issue 3).

(a) Engine overhead: an evolutionary search over function steps that do nothing (no model, no
    sleep), 4 examples per candidate: what the loop itself costs per candidate (checks,
    mutation, archive, events, promotion), in ms.
(b) The GSM8K replay problem at time scale 0 (the offline real-data job): an evolutionary search
    with the problem's defaults (40 evaluations, minibatch 20, seed 42) and the winner on the
    1,019-problem test split: wall time, candidates, example runs, best validation score and
    the test accuracy. Needs `TOPOLOGY_STUDIO_DATASETS` (or the dataset cache).

Usage: `python bench/bench_search.py [--candidates N] [--max-evaluations M] [--skip-gsm8k]`.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from core.errors import DatasetError, ProblemError
from core.evaluation.cache import InMemoryEvaluationCache
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir import parse_topology
from core.problems import load_problem
from core.runtime.tracing import record_model_latency
from core.search.budget import Budget
from core.search.engine import SearchRun, run_search
from core.search.gene import TopologyGene
from core.search.strategies import EvolutionaryConfig, EvolutionarySearch


def _noop(name: str) -> Any:
    def step(x: Any) -> Any:
        record_model_latency(0.0)
        return f"{x}{name}"

    step.__name__ = name
    return step


def _score(output: Any, example: GoldExample) -> float:
    return 1.0 if str(example.expected) in str(output) else 0.0


async def _overhead(n_candidates: int) -> tuple[float, int]:
    callables = CallableRegistry()
    for name in ("a", "b", "c", "d"):
        callables.register(name, _noop(name), f"appends {name}")
    agents = AgentRegistry()
    seed = parse_topology(
        {
            "kind": "pipeline",
            "steps": [{"operation": {"kind": "function_step", "callable_name": "a"}}],
        }
    )
    gene = TopologyGene(name="noop", initial=seed, max_depth=4)
    evaluator = TopologyEvaluator(
        callable_registry=callables,
        agent_registry=agents,
        score_fn=_score,
        cache=InMemoryEvaluationCache(),
        max_depth=4,
    )
    examples = [GoldExample(input=str(i), expected="b", id=f"x{i}") for i in range(4)]
    strategy = EvolutionarySearch(
        EvolutionaryConfig(n_generations=None, population_size=10, minibatch_size=4, seed=1)
    )
    run = SearchRun(
        strategy,
        gene=gene,
        evaluator=evaluator,
        validation=examples,
        callable_registry=callables,
        agent_registry=agents,
        budget=Budget(max_evaluations=n_candidates),
        handle_sigint=False,
    )
    start = time.perf_counter()
    result = await run.run()
    elapsed = time.perf_counter() - start
    evaluated = sum(1 for r in result.history if r.status == "evaluated")
    return elapsed, evaluated


async def _gsm8k(max_evaluations: int) -> None:
    try:
        problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
    except (DatasetError, ProblemError) as exc:
        print(f"(b) gsm8k_replay: skipped ({str(exc).splitlines()[0]})")
        return
    start = time.perf_counter()
    result = await run_search(
        problem,
        "evolutionary",
        budget=Budget(max_evaluations=max_evaluations),
        handle_sigint=False,
    )
    elapsed = time.perf_counter() - start
    used = result.raw["budget_used"]
    test = result.raw["test"] or {}
    print(
        f"(b) gsm8k_replay evolutionary: {elapsed:.2f} s wall, "
        f"{int(used['evaluations'])} candidate evaluations, "
        f"{int(used['example_evaluations'])} example runs "
        f"({1000 * elapsed / max(1.0, used['example_evaluations']):.2f} ms each), "
        f"stop: {result.raw['stop_reason']}"
    )
    print(
        f"    best candidate {result.raw['best_idx']}: validation score {result.best_score:.4f}; "
        f"test accuracy {test.get('accuracy', float('nan')):.4f} on {test.get('n_examples', 0)} "
        f"problems at ${test.get('cost_usd', float('nan')):.4f} per problem; "
        f"front of {len(result.pareto_candidates)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Search engine benchmarks (issue 3).")
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--max-evaluations", type=int, default=40)
    parser.add_argument("--skip-gsm8k", action="store_true")
    args = parser.parse_args()
    elapsed, evaluated = asyncio.run(_overhead(args.candidates))
    print(
        f"(a) engine overhead: {evaluated} candidates in {elapsed:.2f} s = "
        f"{1000 * elapsed / max(1, evaluated):.2f} ms per candidate (4 no-op examples each)"
    )
    if not args.skip_gsm8k:
        asyncio.run(_gsm8k(args.max_evaluations))


if __name__ == "__main__":
    main()
