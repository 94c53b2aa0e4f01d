"""What the meta agent's designer is shown of the archive, per `archive_strategy` (semantics
section 8: the strategy changes only what the designer is shown), and the config defaults."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from pydantic_ai import models
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import blank_step, toy_world  # noqa: E402

from core.evaluation.metrics import MetricWeights  # noqa: E402
from core.evaluation.pricing import ModelPrice, Pricer  # noqa: E402
from core.search.strategies import MetaAgentConfig, MetaAgentSearch  # noqa: E402

models.ALLOW_MODEL_REQUESTS = False

PRICER = Pricer({"function:designer": ModelPrice(input_usd_per_1k=0.0, output_usd_per_1k=0.0)})


def design(*names: str) -> str:
    steps = [{"operation": {"kind": "function_step", "callable_name": n}} for n in names]
    return json.dumps({"thought": "+".join(names), "spec": {"kind": "pipeline", "steps": steps}})


class Designer:
    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        texts = [
            p.content
            for p in messages[-1].parts
            if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        ]
        self.prompts.append(texts[-1] if texts else "")
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, self.answers.pop(0))],
            usage=RequestUsage(input_tokens=10, output_tokens=10),
        )


def shown(prompt: str) -> list[tuple[int, str]]:
    """(candidate, "ok" | "INVALID") per entry the prompt shows, in order."""
    rows = re.findall(r"^\[\d+\] candidate (\d+) \(.*?\): (INVALID|score)", prompt, re.M)
    return [(int(c), "INVALID" if m == "INVALID" else "ok") for c, m in rows]


def third_prompt(strategy: str, size: int) -> str:
    """The design prompt of generation 2, after the seed `a`, a degenerate `blank` and `a, b`."""
    designer = Designer(design("blank"), design("a", "b"), design("a", "b", "c"))
    config = MetaAgentConfig(
        n_generations=3,
        reflexion_passes=0,
        minibatch_size=10,
        archive_strategy=strategy,  # type: ignore[arg-type]
        archive_size=size,
    )
    strategy_ = MetaAgentSearch(
        config, model=FunctionModel(designer, model_name="designer"), pricer=PRICER
    )
    result = toy_world(extra={"blank": blank_step}).run(strategy_)
    assert [r.status for r in result.history] == ["evaluated"] * 4
    assert result.raw["archive"].entries[1].invalid_reason.startswith("degenerate")
    assert len(designer.prompts) == 3
    return designer.prompts[2]


@pytest.mark.parametrize(
    ("strategy", "size", "expected"),
    [
        ("top_k", 1, [(2, "ok")]),
        ("top_k", 5, [(2, "ok"), (0, "ok")]),  # valid entries only, best first
        ("cumulative", 1, [(0, "ok"), (1, "INVALID"), (2, "ok")]),  # everything, in order
        ("parallel", 2, [(1, "INVALID"), (2, "ok")]),  # the latest two
    ],
)
def test_the_designer_is_shown_the_view_of_its_archive_strategy(
    strategy: str, size: int, expected: list[tuple[int, str]]
) -> None:
    prompt = third_prompt(strategy, size)
    assert shown(prompt) == expected
    assert prompt.startswith(
        f"Generation 2. The archive holds 3 evaluated topologies; you are shown {len(expected)} "
        f"({strategy} view)."
    )
    if (1, "INVALID") in expected:
        assert "INVALID: degenerate: 100% blank or failed runs" in prompt


def test_meta_agent_config_defaults_are_the_contracts() -> None:
    config = MetaAgentConfig()
    assert config.model_dump() == {
        "n_generations": 10,
        "minibatch_size": 5,
        "minibatch_margin": None,
        "promotion_k_se": 0.0,
        "seed": 42,
        "weights": MetricWeights().model_dump(),
        "archive_strategy": "top_k",
        "archive_size": 5,
        "reflexion_passes": 2,
        "debug_max": 3,
        "output_retries": 1,
    }
    assert MetricWeights().model_dump() == {
        "accuracy": 1.0,
        "cost_usd": -10.0,
        "latency_ms": -0.00002,
        "confidence": 0.1,
        "robustness": 0.2,
    }


def test_the_prompt_states_the_weights_it_ranks_by() -> None:
    designer = Designer(design("a", "b"))
    config = MetaAgentConfig(
        n_generations=1, reflexion_passes=0, weights=MetricWeights(cost_usd=-0.1)
    )
    strategy = MetaAgentSearch(
        config, model=FunctionModel(designer, model_name="designer"), pricer=PRICER
    )
    toy_world().run(strategy)
    assert (
        "(higher is better: 1 x accuracy -0.1 x cost in USD per example -2e-05 x latency in ms)"
        in designer.prompts[0]
    )
