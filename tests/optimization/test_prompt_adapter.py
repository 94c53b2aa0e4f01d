"""`PromptAdapter`: gepa's adapter protocol over our evaluator, exact values."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core import AgentStepSpec, GoldExample, PipelineSpec, PipelineStepEntry, TopologyEvaluator
from core.optimization import Genome, PromptGene
from core.optimization.adapter import PromptAdapter

models.ALLOW_MODEL_REQUESTS = False

FIX = "End with a line 'Answer: <number>'."


def _solver(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    question = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
    total = sum(int(w) for w in question.split() if w.isdigit())
    if FIX in (info.instructions or ""):
        return ModelResponse(parts=[TextPart(f"Adding up.\nAnswer: {total}")])
    return ModelResponse(parts=[TextPart(f"It is about {total} or so")])


def _score(output: Any, example: GoldExample) -> float:
    return 1.0 if str(output).endswith(f"Answer: {example.expected}") else 0.0


def world() -> tuple[TopologyEvaluator, PipelineSpec, Genome]:
    """The one-agent topology of these tests: its evaluator, spec and prompt genome (the runner's
    test uses it too)."""
    solver = Agent(FunctionModel(_solver, model_name="solver-fn"), name="solver")
    evaluator = TopologyEvaluator(
        callable_registry={},
        agent_registry={"solver": lambda: solver},
        score_fn=_score,
        timer=lambda: 0.0,
    )
    spec = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="solver"))])
    genome = Genome(genes=(PromptGene(name="solver.system_prompt", initial="Solve it."),))
    return evaluator, spec, genome


def _adapter(loop: asyncio.AbstractEventLoop) -> PromptAdapter:
    evaluator, spec, genome = world()
    return PromptAdapter(evaluator, spec, genome, loop)


BATCH = [
    GoldExample(input="2 plus 3", expected="5", id="a"),
    GoldExample(input="4 plus 4", expected="8", id="b"),
]


def _evaluate(candidate: dict[str, str]) -> tuple[Any, Any, PromptAdapter]:
    async def main() -> tuple[Any, Any, PromptAdapter]:
        adapter = _adapter(asyncio.get_running_loop())
        batch = await asyncio.to_thread(adapter.evaluate, BATCH, candidate, True)
        data = adapter.make_reflective_dataset(candidate, batch, ["solver.system_prompt"])
        return batch, data, adapter

    return asyncio.run(main())


def test_seed_prompt_scores_and_reflective_dataset() -> None:
    batch, data, adapter = _evaluate({"solver.system_prompt": "Solve it."})
    assert batch.scores == [0.0, 0.0]
    assert batch.outputs == ["It is about 5 or so", "It is about 8 or so"]
    assert data == {
        "solver.system_prompt": [
            {
                "Inputs": "2 plus 3",
                "Generated Outputs": "It is about 5 or so",
                "Feedback": "incorrect (score 0); expected answer: 5",
            },
            {
                "Inputs": "4 plus 4",
                "Generated Outputs": "It is about 8 or so",
                "Feedback": "incorrect (score 0); expected answer: 8",
            },
        ]
    }
    assert (adapter.metric_calls, adapter.model_requests) == (2, 2)


def test_fixed_prompt_reaches_the_model_and_scores() -> None:
    batch, data, _ = _evaluate({"solver.system_prompt": f"Solve it. {FIX}"})
    assert batch.scores == [1.0, 1.0]
    assert [r["Feedback"] for r in data["solver.system_prompt"]] == [
        "correct (score 1); expected answer: 5",
        "correct (score 1); expected answer: 8",
    ]
