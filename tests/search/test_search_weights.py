"""Metric weights per problem: `[search.weights]` in the TOML, validated into `MetricWeights`,
used by `build_search` / `run_search` unless the caller overrides them, recorded in the run
config, and what ranks the archive (its aggregate scores and the winner)."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models

from core.errors import ProblemError
from core.evaluation.metrics import MetricWeights, aggregate_score
from core.ir import parse_topology, spec_hash
from core.problems import Problem, load_problem
from core.search.budget import Budget
from core.search.engine import build_search, run_search
from core.search.events import RunStarted
from core.search.strategies.evolutionary import EvolutionaryConfig
from core.search.subscribers import EventLog

models.ALLOW_MODEL_REQUESTS = False

TOML = """\
name = "pricey"
description = "Say four: a cheap agent right on odd questions, a strong one always right."
score_function = "exact"

[gold]
source = "jsonl"
path = "gold.jsonl"
validation_size = 4
split_salt = "pricey"

[search]
strategy = "evolutionary"
max_evaluations = 10
minibatch_size = 4
seed = 5
allowed_step_kinds = ["agent_step"]
max_depth = 1

# one accuracy point (0.01) is worth a dollar a problem
[search.weights]
accuracy = 1.0
cost_usd = -0.01
latency_ms = 0.0

[models]
latency_source = "model"
[models.prices."function:toy:cheap"]
input_usd_per_1k = 1.0
output_usd_per_1k = 0.0
[models.prices."function:toy:strong"]
input_usd_per_1k = 10.0
output_usd_per_1k = 0.0
"""

REGISTRIES = """\
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RequestUsage

from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


def _number(messages):
    for part in messages[-1].parts:
        if isinstance(part, UserPromptPart):
            return int(str(part.content).split()[-1].rstrip("?"))
    raise ValueError("no question")


def cheap(messages, info):
    answer = "4" if _number(messages) % 2 == 1 else "5"
    return ModelResponse(parts=[TextPart(answer)], usage=RequestUsage(input_tokens=1000))


def strong(messages, info):
    return ModelResponse(parts=[TextPart("4")], usage=RequestUsage(input_tokens=1000))


def exact(output, example):
    return 1.0 if str(output).strip() == example.expected else 0.0


def build(ctx: ProblemContext) -> ProblemParts:
    agents = AgentRegistry()
    agents.register(
        "cheap", lambda: Agent(FunctionModel(cheap, model_name="toy:cheap")), "$1 a call."
    )
    agents.register(
        "strong", lambda: Agent(FunctionModel(strong, model_name="toy:strong")), "$10 a call."
    )
    return ProblemParts(
        callable_registry=CallableRegistry(),
        agent_registry=agents,
        score_functions={"exact": exact},
        roles={},
    )
"""

SEED = {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "cheap"}}]}
GOLD = [{"id": f"q{i}", "input": f"what is {i}?", "expected": "4"} for i in range(6)]
PROBLEM_WEIGHTS = MetricWeights(accuracy=1.0, cost_usd=-0.01, latency_ms=0.0)


def make_problem(root: Path, toml: str = TOML) -> Path:
    d = root / "pricey"
    d.mkdir(parents=True)
    (d / "problem.toml").write_text(toml)
    (d / "registries.py").write_text(REGISTRIES)
    (d / "seed.json").write_text(json.dumps(SEED))
    (d / "gold.jsonl").write_text("".join(json.dumps(g) + "\n" for g in GOLD))
    return d


@pytest.fixture
def problem(tmp_path: Path) -> Problem:
    return load_problem(make_problem(tmp_path))


def load_error(path: Path, **kwargs: Any) -> ProblemError:
    with pytest.raises(ProblemError) as info:
        load_problem(path, **kwargs)
    return info.value


# -- the TOML ----------------------------------------------------------------------------------


def test_weights_are_read_from_search_weights_and_missing_fields_keep_the_defaults(
    problem: Problem,
) -> None:
    assert problem.search.weights == MetricWeights(
        accuracy=1.0, cost_usd=-0.01, latency_ms=0.0, confidence=0.1, robustness=0.2
    )
    assert problem.to_dict()["config"]["search"]["weights"] == {
        "accuracy": 1.0,
        "cost_usd": -0.01,
        "latency_ms": 0.0,
        "confidence": 0.1,
        "robustness": 0.2,
    }


def test_a_problem_without_weights_gets_the_contracts_defaults(tmp_path: Path) -> None:
    toml = TOML.split("# one accuracy point")[0] + TOML.split("latency_ms = 0.0\n")[1]
    p = load_problem(make_problem(tmp_path, toml))
    assert p.search.weights == MetricWeights()


def test_bad_weights_are_errors_naming_the_field(tmp_path: Path) -> None:
    d = make_problem(tmp_path)
    toml_file = str(d.resolve() / "problem.toml")
    err = load_error(d, overrides={"search.weights.cost_usd": "cheap"})
    assert (err.file, err.field) == (toml_file, "search.weights.cost_usd")
    err = load_error(d, overrides={"search.weights.speed": 1.0})
    assert (err.file, err.field) == (toml_file, "search.weights.speed")
    err = load_error(d, overrides={"search.weights.accuracy": math.inf})
    assert err.field == "search.weights.accuracy"
    (d / "problem.toml").write_text(TOML.replace("cost_usd = -0.01", "cost_usd = nan"))
    err = load_error(d)
    assert err.field == "search.weights.cost_usd"
    assert str(err).startswith(f"{toml_file}: field 'search.weights.cost_usd': ")


def test_the_gsm8k_weights_are_set_and_documented() -> None:
    text = (
        Path(__file__).resolve().parents[2] / "data" / "problems" / "gsm8k_replay" / "problem.toml"
    ).read_text()
    table = text.split("[search.weights]\n")[1].split("\n\n")[0]
    assert table == "accuracy = 1.0\ncost_usd = -0.1\nlatency_ms = -0.000001"
    assert "a point of accuracy (0.01) is worth 10 cents a problem" in " ".join(text.split())


# -- the search --------------------------------------------------------------------------------


def search(problem: Problem, **options: Any) -> tuple[Any, EventLog]:
    log = EventLog()
    options.setdefault("handle_sigint", False)
    result = asyncio.run(run_search(problem, subscribers=[log], **options))
    return result, log


def test_the_problems_weights_rank_the_archive_and_are_recorded(problem: Problem) -> None:
    result, log = search(problem)
    started = log.of_type(RunStarted)[0]
    assert started.config["weights"] == PROBLEM_WEIGHTS.model_dump()
    assert started.config["evaluator"]["weights"] == PROBLEM_WEIGHTS.model_dump()
    archive = result.raw["archive"]
    for entry in archive.entries:
        assert entry.aggregate_score == aggregate_score(list(entry.bundles), PROBLEM_WEIGHTS)
    seed = archive.entries[0]
    assert [b.cost_usd for b in seed.bundles] == [1.0, 1.0, 1.0, 1.0]
    assert [b.accuracy for b in seed.bundles] == [1.0, 1.0, 0.0, 1.0]  # q1, q3, q4, q5
    assert seed.aggregate_score == pytest.approx(0.74, abs=1e-15)
    # at a dollar a point, the strong agent (always right, $10) beats the cheap one (3 of 4, $1)
    best = archive[archive.best_index("validation")]
    strong = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agent_step", "agent_name": "strong"}}],
    }
    assert best.spec_hash == spec_hash(parse_topology(strong))
    assert best.aggregate_score == pytest.approx(0.9, abs=1e-15)
    assert result.best_score == best.aggregate_score


def test_the_callers_weights_override_the_problems(problem: Problem) -> None:
    # the contract's defaults: $10 a call costs 100 points; the cheap seed stays the winner
    result, log = search(problem, weights=MetricWeights())
    assert log.of_type(RunStarted)[0].config["weights"] == MetricWeights().model_dump()
    assert result.raw["best_idx"] == 0
    assert result.best_score == pytest.approx(0.75 - 10.0, abs=1e-12)
    for entry in result.raw["archive"].entries:
        assert entry.aggregate_score == aggregate_score(list(entry.bundles), MetricWeights())


def test_weights_in_a_config_mapping_or_model_override_and_fill_gaps(problem: Problem) -> None:
    mine = MetricWeights(cost_usd=-1.0)
    run = build_search(problem, config={"weights": mine.model_dump()}, handle_sigint=False)
    assert run.config.weights == mine
    assert run.evaluator.config.weights == mine
    run = build_search(problem, config={"n_generations": 2}, handle_sigint=False)
    assert run.config.weights == PROBLEM_WEIGHTS
    run = build_search(problem, config=EvolutionaryConfig(seed=1), handle_sigint=False)
    assert run.config.weights == PROBLEM_WEIGHTS  # a model built without weights: the problem's
    run = build_search(problem, config=EvolutionaryConfig(weights=mine), handle_sigint=False)
    assert run.config.weights == mine
    run = build_search(
        problem, config={"weights": mine}, weights={"accuracy": 2.0}, handle_sigint=False
    )
    assert run.config.weights == MetricWeights(accuracy=2.0)
    strategy = build_search(problem, handle_sigint=False).strategy
    with pytest.raises(ValueError, match="give config, seed and weights to the strategy"):
        build_search(problem, strategy, weights=mine)


def test_the_problems_evaluator_uses_its_weights(problem: Problem) -> None:
    assert problem.evaluator().config.weights == PROBLEM_WEIGHTS
    assert problem.evaluator(weights=MetricWeights()).config.weights == MetricWeights()
    ev = asyncio.run(problem.evaluator().evaluate(SEED, problem.splits["validation"]))
    assert ev.aggregate_score == pytest.approx(0.74, abs=1e-15)


def test_budget_is_still_the_problems(problem: Problem) -> None:
    run = build_search(problem, handle_sigint=False)
    assert run.budget == Budget(max_evaluations=10)
