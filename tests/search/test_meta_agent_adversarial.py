"""The meta agent against hostile designers: deeply nested designs (as JSON text, or as the
already-parsed arguments some providers deliver), huge designs, and a designer that raises."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import toy_world  # noqa: E402

from core.errors import SearchError  # noqa: E402
from core.evaluation.pricing import ModelPrice, Pricer  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.search.strategies import MetaAgentConfig, MetaAgentSearch  # noqa: E402

models.ALLOW_MODEL_REQUESTS = False

PRICER = Pricer({"function:designer": ModelPrice(input_usd_per_1k=0.001, output_usd_per_1k=0.002)})
PER_REQUEST = 0.001 + 0.0002

VALID = {
    "thought": "a then b",
    "spec": {
        "kind": "pipeline",
        "steps": [
            {"operation": {"kind": "function_step", "callable_name": "a"}},
            {"operation": {"kind": "function_step", "callable_name": "b"}},
        ],
    },
}


def nested(levels: int) -> dict[str, Any]:
    """`levels` pipelines around one function step, as a dict."""
    node: dict[str, Any] = {"kind": "function_step", "callable_name": "a"}
    for _ in range(levels):
        node = {"kind": "pipeline", "steps": [{"operation": node}]}
    return {"thought": "deep", "spec": node}


def nested_text(levels: int) -> str:
    """The same design as JSON text, built without recursion (any depth)."""
    inner = '{"kind": "function_step", "callable_name": "a"}'
    head = '{"kind": "pipeline", "steps": [{"operation": ' * levels
    return '{"thought": "deep", "spec": ' + head + inner + "}]}" * levels + "}"


class Script:
    """A designer answering the given arguments in turn (a dict, or JSON text)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        texts = [
            p.content
            for p in messages[-1].parts
            if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        ]
        self.prompts.append(texts[-1] if texts else "")
        args = self.answers.pop(0)
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, args)],
            usage=RequestUsage(input_tokens=1000, output_tokens=100),
        )


def run(script: Script, **config: Any) -> Any:
    config = {"n_generations": 1, "reflexion_passes": 0, "output_retries": 0, **config}
    strategy = MetaAgentSearch(
        MetaAgentConfig(**config),
        model=FunctionModel(script, model_name="designer"),
        pricer=PRICER,
    )
    return toy_world().run(strategy)


@pytest.mark.parametrize(
    ("answer", "limit_text"),
    [
        (nested(300), "JSON nesting deeper than 256 levels at $.spec.steps[0].operation"),
        (nested(3000), "spec nesting depth exceeds max_depth=8"),
        (nested_text(300), "JSON nesting deeper than 256 levels at $.spec.steps[0].operation"),
        (nested_text(3000), "JSON nesting deeper than 256 levels at $.spec.steps[0].operation"),
    ],
    ids=["dict-300", "dict-3000", "text-300", "text-3000"],
)
def test_a_too_deep_design_goes_to_a_debug_retry_with_our_limit_error(
    answer: Any, limit_text: str
) -> None:
    """F1 through the designer: whatever form a too-deep design takes, the designer is told the
    limit and the JSON path in a debug retry (never the parser's recursion message), and the run
    goes on; both calls are paid for."""
    script = Script(answer, json.dumps(VALID))
    result = run(script)
    seed, candidate = result.history
    assert candidate.status == "evaluated"
    assert candidate.thought == "a then b"
    assert candidate.design_requests == 2
    assert candidate.design_cost_usd == pytest.approx(2 * PER_REQUEST, abs=1e-15)
    debug = script.prompts[1]
    assert "Your design cannot be used. The error:\n" in debug
    assert limit_text in debug
    assert "max_depth=8" in debug
    assert "$.spec.steps[0].operation" in debug
    assert "recursion" not in debug.lower() and "circular" not in debug.lower()
    assert "Allowed names:" in debug


def test_a_design_that_stays_too_deep_is_rejected_with_its_reason_and_cost() -> None:
    script = Script(nested(300), nested(300))
    result = run(script, debug_max=1)
    _, candidate = result.history
    assert candidate.status == "rejected"
    assert candidate.reason is not None
    assert candidate.reason.startswith(
        "no_valid_design: still invalid after 1 debug retry: invalid_design: JSON nesting deeper "
        "than 256 levels at $.spec.steps[0].operation"
    )
    assert candidate.reason.endswith("no spec within max_depth=8 nests that deep")
    assert candidate.design_requests == 2
    assert len(candidate.spec_json) <= 4000


def test_a_huge_design_is_rejected_by_the_node_limit_and_the_run_goes_on() -> None:
    steps = [{"operation": {"kind": "function_step", "callable_name": "a"}}] * 5000
    huge = json.dumps({"thought": "more", "spec": {"kind": "pipeline", "steps": steps}})
    script = Script(huge, json.dumps(VALID))
    result = run(script)
    _, candidate = result.history
    assert candidate.status == "evaluated"
    assert "spec has more than max_nodes=200 nodes" in script.prompts[1]
    assert len(script.prompts[1]) < 2000  # the error names the limit, not 5,000 problems


def test_a_designer_that_raises_fails_the_run_with_a_clear_error_after_the_seed() -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise RuntimeError("designer crashed")

    events: list[SearchEvent] = []
    strategy = MetaAgentSearch(
        MetaAgentConfig(n_generations=1),
        model=FunctionModel(broken, model_name="designer"),
        pricer=PRICER,
    )
    with pytest.raises(SearchError) as info:
        toy_world().run(strategy, events=events)
    assert str(info.value) == (
        "the designer's model call failed (function:designer): RuntimeError: designer crashed"
    )
    assert [e.type for e in events if e.type in ("candidate_evaluated", "run_finished")] == [
        "candidate_evaluated",
        "run_finished",
    ]
    assert events[-1].status == "failed"  # type: ignore[union-attr]
