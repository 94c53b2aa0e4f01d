"""Evaluator benchmarks: evaluation concurrency against its ideal, and the cache of re-proposed
specs.

(a) Concurrency: 200 examples through a 3-step pipeline whose steps each take 20 ms (async
    sleeps), at concurrency 32. Prints wall time / ideal, where ideal = ceil(200 / 32) x 60 ms
    = 420 ms. Target: <= 1.2 (the reference implementation evaluates examples one after another,
    which would be 200 x 60 ms = 12 s, a ratio of about 28.6).
(b) Cache: the same spec proposed again (here with node ids added and keys in another order, so
    only the canonical hash matches) makes 0 model calls. The pipeline's middle step is a
    pydantic-ai agent on a `FunctionModel` that counts its calls.

Usage: `python bench/bench_eval.py [--examples N] [--concurrency C] [--step-ms MS] [--rounds R]`.
Prints one line per figure; for (a) the best of R rounds is reported to damp noise from other
processes.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from core.evaluation.cache import InMemoryEvaluationCache
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice, Pricer
from core.hydrate import AgentRegistry, CallableRegistry

TARGET_RATIO = 1.2


def _exact(output: Any, example: GoldExample) -> float:
    return 1.0 if str(output) == str(example.expected) else 0.0


def _sleep_step(name: str, step_s: float) -> Any:
    async def step(x: Any) -> Any:
        await asyncio.sleep(step_s)
        return x

    step.__name__ = name
    return step


async def bench_concurrency(n_examples: int, concurrency: int, step_ms: float, rounds: int) -> None:
    step_s = step_ms / 1000
    callables = CallableRegistry()
    for name in ("parse", "solve", "format"):
        callables.register(name, _sleep_step(name, step_s))
    spec = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "function_step", "callable_name": n}}
            for n in ("parse", "solve", "format")
        ],
    }
    examples = [GoldExample(input=i, expected=i, id=f"ex{i}") for i in range(n_examples)]
    evaluator = TopologyEvaluator(
        callable_registry=callables,
        agent_registry=AgentRegistry(),
        score_fn=_exact,
        concurrency=concurrency,
    )
    ideal_s = math.ceil(n_examples / concurrency) * 3 * step_s
    best = math.inf
    accuracy = math.nan
    for _ in range(rounds):
        start = time.perf_counter()
        ev = await evaluator.evaluate(spec, examples)
        best = min(best, time.perf_counter() - start)
        accuracy = ev.accuracy
    ratio = best / ideal_s
    verdict = "OK" if ratio <= TARGET_RATIO else "OVER TARGET"
    print(
        f"(a) concurrency: {n_examples} examples x 3 steps x {step_ms:g} ms at concurrency "
        f"{concurrency}: wall {best * 1000:.1f} ms, ideal {ideal_s * 1000:.0f} ms, "
        f"ratio {ratio:.3f} (target <= {TARGET_RATIO}) {verdict}; accuracy {accuracy:.2f}"
    )


async def bench_cache(n_examples: int, concurrency: int) -> None:
    calls = 0

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        nonlocal calls
        calls += 1
        return ModelResponse(
            parts=[TextPart("42")], usage=RequestUsage(input_tokens=20, output_tokens=2)
        )

    agents = AgentRegistry()
    agents.register("solver", lambda: Agent(FunctionModel(model, model_name="bench")))
    callables = CallableRegistry()
    callables.register("strip", lambda x: str(x).strip())
    spec = {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "function_step", "callable_name": "strip"}},
            {"operation": {"kind": "agent_step", "agent_name": "solver"}},
            {"operation": {"kind": "function_step", "callable_name": "strip"}},
        ],
    }
    again = {  # the same topology: ids added, keys reordered (canonical hash ignores both)
        "name": "pipeline",
        "id": "root",
        "steps": [
            {"operation": {"callable_name": "strip", "kind": "function_step", "id": "a"}},
            {"operation": {"agent_name": "solver", "kind": "agent_step", "id": "b"}},
            {"operation": {"callable_name": "strip", "kind": "function_step", "id": "c"}},
        ],
        "kind": "pipeline",
    }
    examples = [GoldExample(input=f"q{i}", expected="42", id=f"q{i}") for i in range(n_examples)]
    evaluator = TopologyEvaluator(
        callable_registry=callables,
        agent_registry=agents,
        score_fn=_exact,
        concurrency=concurrency,
        cache=InMemoryEvaluationCache(),
        pricer=Pricer({"function:bench": ModelPrice(input_usd_per_1k=0.5, output_usd_per_1k=1.5)}),
    )
    first = await evaluator.evaluate(spec, examples)
    before = calls
    second = await evaluator.evaluate(again, examples)
    print(
        f"(b) cache: first evaluation {before} model calls (${first.fresh_cost_usd:.4f}); "
        f"re-proposed spec {calls - before} model calls, {second.n_model_requests} requests, "
        f"{second.n_cached}/{len(second.results)} results cached, "
        f"${second.fresh_cost_usd:.4f} spent (target 0) "
        f"{'OK' if calls == before and first.spec_hash == second.spec_hash else 'FAILED'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description="Evaluator benchmarks: concurrency and cache.")
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(bench_concurrency(args.examples, args.concurrency, args.step_ms, args.rounds))
    asyncio.run(bench_cache(args.examples, args.concurrency))


if __name__ == "__main__":
    main()
