"""Phase 2 resume and phase 2's score: an interrupted GEPA run continues from its `PromptCallLog`
without repeating a metric call and ends as the uninterrupted run; `best_score` is phase 1's
aggregate score, GEPA's accuracy is kept beside it under its own name."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core import AgentStepSpec, GoldExample, PipelineSpec, PipelineStepEntry, TopologyEvaluator
from core.errors import OptimizationError
from core.evaluation.metrics import MetricWeights
from core.optimization import Genome, OptimizationConfig, OptimizationRunner, PromptGene
from core.optimization.replay import PromptCallLog

models.ALLOW_MODEL_REQUESTS = False
FIX = "End with a line 'Answer: <number>'."
TRAIN = [
    GoldExample(input=f"{i} plus {i + 2}", expected=str(2 * i + 2), id=f"t{i}") for i in range(6)
]
VAL = [
    GoldExample(input=f"{i} plus {i + 1}", expected=str(2 * i + 1), id=f"v{i}") for i in range(5)
]


class Stop(BaseException):
    """The deterministic interruption: raised after the Nth recorded evaluation."""


class StoppingLog(PromptCallLog):
    def __init__(self, path: Path, after: int) -> None:
        super().__init__(path)
        self.after = after
        self.evaluations = 0

    def append(self, kind: str, key: str, answer: dict[str, Any]) -> None:
        super().append(kind, key, answer)
        if kind == "evaluate":
            self.evaluations += 1
            if self.evaluations == self.after:
                raise Stop


def _run(
    log: PromptCallLog | None, weights: MetricWeights | None = None
) -> tuple[Any, dict[str, int]]:
    calls = {"task": 0, "reflect": 0}

    def solver_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["task"] += 1
        question = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
        total = sum(int(w) for w in question.split() if w.isdigit())
        ok = FIX in (info.instructions or "") and total % 3 != 0  # never perfect: GEPA goes on
        return ModelResponse(parts=[TextPart(f"Answer: {total}" if ok else f"about {total}")])

    def reflect_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["reflect"] += 1
        prompt = str(messages[-1].parts[-1].content)  # type: ignore[union-attr]
        return ModelResponse(parts=[TextPart(f"```\nSolve it. {FIX} (v{len(prompt) % 89})\n```")])

    solver = Agent(FunctionModel(solver_fn, model_name="solver-fn"), name="solver")
    evaluator = TopologyEvaluator(
        callable_registry={},
        agent_registry={"solver": lambda: solver},
        score_fn=lambda out, ex: 1.0 if str(out) == f"Answer: {ex.expected}" else 0.0,
        timer=lambda: 0.0,
        **({} if weights is None else {"weights": weights}),
    )
    spec = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name="solver"))])
    runner = OptimizationRunner(
        OptimizationConfig(max_metric_calls=30, reflection_minibatch_size=2, seed=3),
        genome=Genome(genes=(PromptGene(name="solver.system_prompt", initial="Solve it."),)),
        evaluator=evaluator,
        spec=spec,
        reflection_model=FunctionModel(reflect_fn, model_name="reflect-fn"),
    )
    result = asyncio.run(runner.optimize(trainset=TRAIN, valset=VAL, call_log=log))
    return result, calls


def _comparable(result: Any) -> dict[str, Any]:
    raw = dict(result.raw)
    raw.pop("log")
    raw["budget_used"] = {
        k: v for k, v in raw["budget_used"].items() if k != "replayed_metric_calls"
    }
    return {
        "best": result.best_candidate,
        "score": result.best_score,
        "history": [r.model_dump() for r in result.history],
        "raw": raw,
    }


def test_interrupted_phase_two_resumes_without_repeating_metric_calls(tmp_path: Path) -> None:
    whole, whole_calls = _run(None)
    used = whole.raw["budget_used"]
    assert (used["metric_calls"], len(whole.history)) == (30, 2)
    assert whole_calls == {"task": 40, "reflect": 4}  # 30 metric calls + 2 x 5 re-scoring

    path = tmp_path / "prompts.jsonl"
    # stopped in GEPA's third iteration: the seed's validation pass (5), iteration 1's parent
    # and child minibatches (2 + 2) and the child's validation pass (5), iteration 2's
    # minibatch (2), iteration 3's (2); each candidate is re-scored as GEPA accepts it (the
    # seed after its validation pass, candidate 1 after its own), so both re-scorings are in
    log = StoppingLog(path, after=6)
    with pytest.raises(Stop):
        _run(log)
    log.close()
    with PromptCallLog(path) as again:
        assert again.recorded == 9  # 6 evaluations, 1 reflection, 2 re-scorings
        resumed, second_calls = _run(again)
        assert again.replayed == 9

    assert _comparable(resumed) == _comparable(whole)
    before = resumed.raw["budget_used"]["replayed_metric_calls"]
    assert before == 5 + 2 + 2 + 5 + 2 + 2
    # each model call of the uninterrupted run is made once over the two processes
    assert second_calls == {"task": 40 - 18 - 2 * 5, "reflect": 4 - 1}


def test_a_damaged_call_log_line_is_refused_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"kind": "reflect", "key": "k", "output": "x"}\n[1, 2]\n')
    with pytest.raises(OptimizationError, match=r"prompts.jsonl, line 2: not a call record"):
        PromptCallLog(path)


def test_a_line_cut_short_is_dropped_and_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_text('{"kind": "reflect", "key": "k", "output": "x"}\n{"kind": "ev')
    with PromptCallLog(path) as log:
        assert log.recorded == 1
        log.append("reflect", "k2", {"output": "y"})
    assert path.read_text().splitlines() == [
        '{"kind": "reflect", "key": "k", "output": "x"}',
        '{"kind": "reflect", "key": "k2", "output": "y"}',
    ]


def test_best_score_is_the_aggregate_score_and_gepa_accuracy_is_named() -> None:
    result, _ = _run(None, weights=MetricWeights(accuracy=2.0, latency_ms=0.0))
    best = result.history[result.raw["best_idx"]]
    assert result.raw["gepa_best_accuracy"] == best.accuracy == 0.6
    assert result.best_score == result.raw["best_aggregate_score"] == best.score == 1.2
    assert [r.score for r in result.history] == [2.0 * r.accuracy for r in result.history]
