"""`replays_only`: when the summary says a run's cost is modelled. Only a problem that prices
replayed models alone (`[models.prices]` keys `replay:*`: gsm8k_replay) qualifies, and not once
`--model` replaces its models; a problem pricing another model (here: a function model, priced
free), or pricing nothing, does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.problems import load_problem
from core.problems._prices import cost_basis
from studio.cli.search import replays_only

_REGISTRIES = """
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


def build(ctx: ProblemContext) -> ProblemParts:
    agents = AgentRegistry()
    if ctx.root.name == "with_agent":
        model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("1")]))
        agents.register("solver", lambda: Agent(model, name="solver"), "Answers.")
    callables = CallableRegistry()
    callables.register("echo", lambda x: x, "Echoes.")
    return ProblemParts(
        callable_registry=callables,
        agent_registry=agents,
        score_functions={"exact": lambda output, ex: float(output == ex.expected)},
        load_gold=lambda: [GoldExample(input=str(i), expected=str(i), id=f"q{i}") for i in range(6)],
        roles={"step": ["echo"]},
    )
"""


def _problem(tmp_path: Path, name: str) -> Path:
    root = tmp_path / name
    root.mkdir()
    price = '[models.prices."function:<lambda>:"]\nfree = true\n' if name == "with_agent" else ""
    (root / "problem.toml").write_text(f'name = "{name}"\n[gold]\nvalidation_size = 4\n{price}')
    (root / "registries.py").write_text(_REGISTRIES)
    (root / "seed.json").write_text(
        '{"kind": "pipeline", "steps": [{"operation": {"kind": "function_step", '
        '"callable_name": "echo"}}]}'
    )
    return root


def test_gsm8k_replay_is_modelled_unless_a_model_replaces_its_agents() -> None:
    problem = load_problem("gsm8k_replay")
    assert replays_only(problem) is True
    assert replays_only(problem, "openai:gpt-4o") is False


@pytest.mark.parametrize("name", ["with_agent", "no_agent"])
def test_another_model_or_no_price_is_not_modelled(tmp_path: Path, name: str) -> None:
    problem = load_problem(str(_problem(tmp_path, name)))
    assert len(problem.agent_registry.names()) == (1 if name == "with_agent" else 0)
    assert replays_only(problem) is False


def test_the_cost_basis_of_a_price_table() -> None:
    assert cost_basis({"replay:6b": 1, "replay:175b": 2}) == "replayed"
    assert cost_basis({"replay:6b": 1, "openai:gpt-4o": 2}) == "measured"
    assert cost_basis({}) == ""
