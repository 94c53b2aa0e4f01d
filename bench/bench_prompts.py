"""Phase 2 (GEPA prompt evolution) overhead: ms per metric call beyond model time, and model
calls made for a budget of metric calls (issue 16; target <= 2 ms per metric call).

The task model is a pydantic-ai FunctionModel answering at once (model time ~0), so the wall
time of `OptimizationRunner.optimize` divided by its metric calls is our overhead per call
(adapter, evaluator, hydration with prompt overrides, GEPA's bookkeeping, thread hand-offs).
Run: `python bench/bench_prompts.py [budget]`.
"""

from __future__ import annotations

import asyncio
import sys
import time

from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core import AgentStepSpec, GoldExample, PipelineSpec, PipelineStepEntry, TopologyEvaluator
from core.optimization import Genome, OptimizationConfig, OptimizationRunner, PromptGene

models.ALLOW_MODEL_REQUESTS = False
FIX = "End with a line 'Answer: <number>'."


def _solver(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    question = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
    total = sum(int(w) for w in question.split() if w.isdigit())
    ok = FIX in (info.instructions or "") and total % 3 != 0  # never perfect: GEPA keeps going
    return ModelResponse(parts=[TextPart(f"Answer: {total}" if ok else f"about {total}")])


def _reflect(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart(f"```\nSolve it. {FIX}\n```")])


def _score(output: object, example: GoldExample) -> float:
    return 1.0 if str(output) == f"Answer: {example.expected}" else 0.0


async def main(budget: int) -> None:
    calls = {"task": 0}

    def counted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["task"] += 1
        return _solver(messages, info)

    solver = Agent(FunctionModel(counted, model_name="solver-fn"), name="solver")
    evaluator = TopologyEvaluator(
        callable_registry={}, agent_registry={"solver": lambda: solver}, score_fn=_score
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
    start = time.perf_counter()
    result = await runner.optimize(trainset=examples[:10], valset=examples[10:])
    wall_ms = (time.perf_counter() - start) * 1000
    used = result.raw["budget_used"]
    print(f"budget: {budget} metric calls; used {used['metric_calls']}")
    print(
        f"model calls: {calls['task']} task + {used['reflection_requests']} reflection "
        f"(final re-scoring of {len(result.history)} candidates included)"
    )
    print(
        f"overhead per metric call beyond model time: {wall_ms / used['metric_calls']:.2f} ms "
        f"(target <= 2 ms; wall {wall_ms:.0f} ms, model time ~0)"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
