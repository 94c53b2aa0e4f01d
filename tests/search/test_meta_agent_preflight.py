"""The meta agent's preflight builds its designer model before anything is evaluated.

A designer whose provider cannot be set up (here `openai:gpt-4o` without `OPENAI_API_KEY`:
pydantic-ai raises `UserError` when it constructs the OpenAI provider) used to fail only at the
first designer call, after the seed topology had been evaluated and paid for. Preflight now
builds (never calls) the model, so the run fails with a `SearchError` naming the model and the
missing setting before a single evaluation.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models
from pydantic_ai.exceptions import UserError
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.openai import OpenAIResponsesModel
from pydantic_ai.models.test import TestModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import ToyWorld, toy_world  # noqa: E402

from core.errors import SearchError  # noqa: E402
from core.evaluation.evaluator import CandidateEvaluation  # noqa: E402
from core.evaluation.pricing import ModelPrice, Pricer  # noqa: E402
from core.search.events import SearchEvent  # noqa: E402
from core.search.strategies import MetaAgentConfig, MetaAgentSearch  # noqa: E402
from core.search.strategies.base import SearchSpace  # noqa: E402

models.ALLOW_MODEL_REQUESTS = False

PRICE = ModelPrice(input_usd_per_1k=0.0025, output_usd_per_1k=0.01)
NO_KEY = (
    "designer model 'openai:gpt-4o' cannot be built: the OPENAI_API_KEY environment variable "
    "is not set (set it, or choose another designer model)"
)


@pytest.fixture
def no_openai_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv(
        "OPENAI_BASE_URL", raising=False
    )  # with a base URL a placeholder key is used


def counting(world: ToyWorld) -> list[int]:
    """Count the world evaluator's `evaluate` calls (one entry per call: its example count)."""
    seen: list[int] = []
    inner = world.evaluator.evaluate

    async def evaluate(spec: Any, examples: Sequence[Any], **kw: Any) -> CandidateEvaluation:
        seen.append(len(examples))
        return await inner(spec, examples, **kw)

    world.evaluator.evaluate = evaluate  # type: ignore[method-assign]
    return seen


def test_a_designer_without_its_api_key_fails_before_any_evaluation(no_openai_key: None) -> None:
    strategy = MetaAgentSearch(
        MetaAgentConfig(n_generations=2),
        model="openai:gpt-4o",
        pricer=Pricer({"openai:gpt-4o": PRICE}),
    )
    world = toy_world()
    evaluated = counting(world)
    events: list[SearchEvent] = []
    with pytest.raises(SearchError) as info:
        world.run(strategy, events=events)
    assert str(info.value) == NO_KEY
    assert isinstance(info.value.__cause__, UserError)
    assert "OPENAI_API_KEY" in str(info.value.__cause__)
    assert evaluated == []  # the evaluator was never asked
    assert world.calls == []  # no step of the seed ran
    assert events == []  # not even a run_started: no half run


def test_the_same_designer_builds_once_its_key_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")
    strategy = MetaAgentSearch(model="openai:gpt-4o", pricer=Pricer({"openai:gpt-4o": PRICE}))
    strategy.preflight(SearchSpace(gene=toy_world().gene))
    model = strategy._designer().model
    assert isinstance(model, OpenAIResponsesModel)  # built, never called
    assert model.model_name == "gpt-4o"


def test_an_unknown_provider_names_the_model(no_openai_key: None) -> None:
    strategy = MetaAgentSearch(model="nosuch:model", pricer=Pricer({"nosuch:model": PRICE}))
    world = toy_world()
    evaluated = counting(world)
    with pytest.raises(SearchError) as info:
        world.run(strategy)
    assert (
        str(info.value)
        == "designer model 'nosuch:model' cannot be built: Unknown model: nosuch:model"
    )
    assert evaluated == [] and world.calls == []


def test_the_test_model_and_function_models_still_build_and_run(no_openai_key: None) -> None:
    strategy = MetaAgentSearch(MetaAgentConfig(n_generations=1), model="test")
    world = toy_world()
    strategy.preflight(SearchSpace(gene=world.gene))
    assert isinstance(strategy._designer().model, TestModel)

    fn = FunctionModel(lambda messages, info: (_ for _ in ()).throw(AssertionError("called")))
    by_object = MetaAgentSearch(model=fn, pricer=Pricer({fn.model_name: PRICE}))
    by_object.preflight(SearchSpace(gene=world.gene))
    assert by_object._designer().model is fn  # the given Model object itself, not called

    result = toy_world().run(MetaAgentSearch(MetaAgentConfig(n_generations=1), model="test"))
    assert [r.candidate_idx for r in result.history] == [0, 1]
    assert result.history[0].status == "evaluated"
