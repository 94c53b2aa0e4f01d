"""`EvaluatorConfig.capture_traces`: spans kept in the results only when asked (so a run's
journal stays small); cost, tokens and latency are the same either way."""

from __future__ import annotations

import asyncio
from typing import Any

from core.evaluation.evaluator import EvaluatorConfig, TopologyEvaluator
from core.evaluation.metrics import GoldExample
from core.evaluation.pricing import ModelPrice, Pricer
from core.hydrate import AgentRegistry, CallableRegistry
from core.runtime.tracing import record_model_latency, record_usage


def _model(x: Any) -> str:
    record_usage("m:priced", requests=1, input_tokens=10, output_tokens=5)
    record_model_latency(120.0)
    return str(x)


def _evaluator(**options: Any) -> TopologyEvaluator:
    creg = CallableRegistry()
    creg.register("llm", _model)
    return TopologyEvaluator(
        callable_registry=creg,
        agent_registry=AgentRegistry(),
        score_fn=lambda out, ex: 1.0 if out == str(ex.expected) else 0.0,
        pricer=Pricer({"m:priced": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0)}),
        **options,
    )


_SPEC = {
    "kind": "pipeline",
    "steps": [{"operation": {"kind": "function_step", "callable_name": "llm"}}],
}


def _run(ev: TopologyEvaluator) -> Any:
    exs = [GoldExample(input=i, expected=str(i), id=f"e{i}") for i in range(2)]
    return asyncio.run(ev.evaluate(_SPEC, exs, split="validation"))


def test_traces_are_off_by_default() -> None:
    assert EvaluatorConfig().capture_traces is False
    result = _run(_evaluator())
    assert [r.trace for r in result.results] == [[], []]


def test_capture_traces_keeps_the_spans() -> None:
    result = _run(_evaluator().with_options(capture_traces=True))
    assert [[s["kind"] for s in r.trace] for r in result.results] == [
        ["pipeline", "function_step"],
        ["pipeline", "function_step"],
    ]
    assert result.results[0].trace[1]["usage"] == [
        {"model_name": "m:priced", "requests": 1, "input_tokens": 10, "output_tokens": 5}
    ]


def test_cost_tokens_and_latency_do_not_depend_on_traces() -> None:
    off = _run(_evaluator())
    on = _run(_evaluator().with_options(capture_traces=True))
    facts = [
        [
            (r.cost_usd, r.latency_ms, r.bundle.input_tokens, r.bundle.output_tokens, r.requests)
            for r in ev.results
        ]
        for ev in (off, on)
    ]
    assert facts[0] == facts[1] == [(0.02, 120.0, 10, 5, 1), (0.02, 120.0, 10, 5, 1)]
    assert (off.accuracy, off.cost_usd) == (on.accuracy, on.cost_usd) == (1.0, 0.02)
