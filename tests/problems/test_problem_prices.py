"""A model with no price is an error at load time, never a silent $0.

Every registered agent's model needs a `[models.prices."<model>"]` entry (both prices, or
`free = true`) unless genai-prices knows it; `function:NAME:` models of pydantic-ai's
`FunctionModel` included.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from core.errors import ProblemError
from core.problems import load_problem

REGISTRIES = """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


def solve(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("4")])


def build(ctx: ProblemContext) -> ProblemParts:
    agents = AgentRegistry()
    agents.register("solver", lambda: Agent(FunctionModel(solve)), "Always answers 4.")
    return ProblemParts(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_functions={"exact": lambda output, ex: float(str(output).strip() == ex.expected)},
        load_gold=lambda: [GoldExample(input=f"{i}+{4 - i}?", expected="4", id=f"q{i}") for i in range(4)],
    )
"""

SEED = {
    "kind": "pipeline",
    "steps": [{"operation": {"kind": "agent_step", "agent_name": "solver"}}],
}

TOML = """
name = "priced"
[gold]
validation_size = 2
[models]
time_scale = 0
"""


def make(tmp_path: Path, prices: str) -> Path:
    d = tmp_path / "priced"
    d.mkdir()
    (d / "problem.toml").write_text(TOML + prices)
    (d / "registries.py").write_text(REGISTRIES)
    (d / "seed.json").write_text(json.dumps(SEED))
    return d


def test_an_unpriced_function_model_is_refused_at_load(tmp_path: Path) -> None:
    d = make(tmp_path, "")
    with pytest.raises(ProblemError) as info:
        load_problem(d)
    assert str(info.value) == (
        f"{d.resolve() / 'problem.toml'}: field 'models.prices.\"function:solve:\"': agent "
        "'solver' runs model 'function:solve:', which has no price: add "
        '[models.prices."function:solve:"] with input_usd_per_1k and output_usd_per_1k (USD per '
        "1,000 tokens), or free = true"
    )
    assert info.value.field == 'models.prices."function:solve:"'


def test_a_misspelled_price_key_is_refused_and_pointed_at(tmp_path: Path) -> None:
    d = make(
        tmp_path,
        '[models.prices."function:solv:"]\ninput_usd_per_1k = 1.0\noutput_usd_per_1k = 2.0\n',
    )
    with pytest.raises(ProblemError) as info:
        load_problem(d)
    assert (
        "agent 'solver' runs model 'function:solve:', which has no price (the table has "
        "'function:solv:': a misspelling?): add [models.prices.\"function:solve:\"]"
    ) in str(info.value)


def test_a_model_declared_free_loads_and_costs_nothing(tmp_path: Path) -> None:
    d = make(tmp_path, '[models.prices."function:solve:"]\nfree = true\n')
    problem = load_problem(d)
    assert problem.prices["function:solve:"].free is True
    ev = asyncio.run(problem.evaluator().evaluate(problem.seed_spec, problem.splits["validation"]))
    assert ev.valid
    assert ev.accuracy == 1.0
    assert ev.cost_usd == 0.0
    assert [r.cost_usd for r in ev.results] == [0.0, 0.0]


def test_a_priced_function_model_costs_its_table_price(tmp_path: Path) -> None:
    d = make(
        tmp_path,
        '[models.prices."function:solve:"]\ninput_usd_per_1k = 1.0\noutput_usd_per_1k = 2.0\n',
    )
    problem = load_problem(d)
    ev = asyncio.run(problem.evaluator().evaluate(problem.seed_spec, problem.splits["validation"]))
    assert ev.valid
    for r in ev.results:  # USD per 1,000 tokens: 1.0 in, 2.0 out
        assert r.bundle.input_tokens > 0
        assert r.cost_usd == pytest.approx(
            (r.bundle.input_tokens * 1.0 + r.bundle.output_tokens * 2.0) / 1000, abs=1e-12
        )


def test_free_with_a_price_is_an_error(tmp_path: Path) -> None:
    d = make(tmp_path, '[models.prices."function:solve:"]\nfree = true\ninput_usd_per_1k = 1.0\n')
    with pytest.raises(ProblemError) as info:
        load_problem(d)
    assert str(info.value) == (
        f"{d.resolve() / 'problem.toml'}: field 'models.prices.function:solve:': Value error, a "
        "model declared free = true takes no price: remove input_usd_per_1k (got {'free': True, "
        "'input_usd_per_1k': 1.0})"
    )
