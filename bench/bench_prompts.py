"""Phase 2 (GEPA prompt evolution) overhead: ms per metric call beyond model time, and model
calls made for a budget of metric calls (target, set with the two-phase optimisation: <= 2 ms
per metric call).

The task and reflection models are pydantic-ai FunctionModels answering at once, so model time
is pydantic-ai's own `Agent.run` machinery (message building, its graph, usage), about 4-7 ms a
run on this machine: every `Agent.run` of the solver and of the reflection agent is timed as it
happens (`_TimedAgent`; the evaluator runs one example at a time, `concurrency=1`, so no two
runs overlap and the sum is exact) and subtracted from the wall time. What is left, divided by
the metric calls, is phase 2's overhead per metric call (adapter, evaluator, hydration with
prompt overrides, GEPA's bookkeeping, the thread hand-offs, the final re-scoring). Both figures
are printed: the wall time per metric call, and the overhead beyond the agents' runs.
Each figure is printed twice: without a call log, and with the `PromptCallLog` that
`search --then-prompts` keeps for resume (one JSON line, flushed and fsynced, per GEPA call).
Run: `python bench/bench_prompts.py [budget]`.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core import AgentStepSpec, GoldExample, PipelineSpec, PipelineStepEntry, TopologyEvaluator
from core.optimization import Genome, OptimizationConfig, OptimizationRunner, PromptGene
from core.optimization.replay import PromptCallLog

models.ALLOW_MODEL_REQUESTS = False
FIX = "End with a line 'Answer: <number>'."


def _solver(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    question = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
    total = sum(int(w) for w in question.split() if w.isdigit())
    ok = FIX in (info.instructions or "") and total % 3 != 0  # never perfect: GEPA keeps going
    return ModelResponse(parts=[TextPart(f"Answer: {total}" if ok else f"about {total}")])


def _reflect(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"```\nSolve it. {FIX}\n```")])


class _TimedAgent(Agent[Any, Any]):
    """An `Agent` adding each `run`'s wall time (ms) to `spent["ms"]`."""

    spent: dict[str, float] = {"ms": 0.0}

    async def run(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        start = time.perf_counter()
        try:
            return await super().run(*args, **kwargs)
        finally:
            self.spent["ms"] += (time.perf_counter() - start) * 1000


def _score(output: object, example: GoldExample) -> float:
    return 1.0 if str(output) == f"Answer: {example.expected}" else 0.0


async def main(budget: int, call_log: PromptCallLog | None = None) -> None:
    calls = {"task": 0}
    _TimedAgent.spent["ms"] = 0.0

    def counted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["task"] += 1
        return _solver(messages, info)

    solver = _TimedAgent(FunctionModel(counted, model_name="solver-fn"), name="solver")
    evaluator = TopologyEvaluator(
        callable_registry={},
        agent_registry={"solver": lambda: solver},
        score_fn=_score,
        concurrency=1,
    )
    spec = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="solver"))])
    examples = [
        GoldExample(input=f"{i} plus {i + 1}", expected=str(2 * i + 1), id=f"q{i}")
        for i in range(20)
    ]
    runner = OptimizationRunner(
        OptimizationConfig(max_metric_calls=budget, reflection_minibatch_size=3),
        genome=Genome(genes=(PromptGene(name="solver.system_prompt", initial="Solve it."),)),
        evaluator=evaluator,
        spec=spec,
        reflection_model=FunctionModel(_reflect, model_name="reflect-fn"),
    )
    runner._reflector = _TimedAgent(  # pyright: ignore[reportPrivateUsage]
        FunctionModel(_reflect, model_name="reflect-fn"), name="gepa_reflection"
    )
    start = time.perf_counter()
    result = await runner.optimize(trainset=examples[:10], valset=examples[10:], call_log=call_log)
    wall_ms = (time.perf_counter() - start) * 1000
    used = result.raw["budget_used"]
    n_task, n_reflect = calls["task"], used["reflection_requests"]
    model_ms = _TimedAgent.spent["ms"]
    agent_ms = model_ms / max(1, n_task + n_reflect)
    print(
        f"{'with' if call_log else 'without'} a call log (what `search --then-prompts` keeps "
        "for resume):"
    )
    print(f"budget: {budget} metric calls; used {used['metric_calls']}")
    print(
        f"model calls: {n_task} task + {n_reflect} reflection "
        f"(final re-scoring of {len(result.history)} candidates included)"
    )
    per_call = used["metric_calls"]
    print(
        f"wall per metric call: {wall_ms / per_call:.2f} ms (wall {wall_ms:.0f} ms; pydantic-ai "
        f"Agent.run: {agent_ms:.2f} ms per call, {model_ms:.0f} ms for all "
        f"{n_task + n_reflect} model calls)"
    )
    print(
        f"overhead per metric call beyond model time: {(wall_ms - model_ms) / per_call:.2f} ms "
        "(target <= 2 ms)"
    )


if __name__ == "__main__":
    BUDGET = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    asyncio.run(main(BUDGET))
    with tempfile.TemporaryDirectory() as folder:
        with PromptCallLog(Path(folder) / "bench.calls") as log:
            asyncio.run(main(BUDGET, log))
