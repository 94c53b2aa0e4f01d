"""Pricer: table first, free fakes, genai-prices offline, unpriced -> NaN with a reason."""

import math
import socket

import pytest
from pydantic import ValidationError

from core.errors import EvaluationError
from core.evaluation.pricing import CostQuote, ModelPrice, Pricer
from core.runtime.tracing import ModelUsage


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any socket connection fails the test: genai-prices must use its bundled data."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"network call attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_table_price_is_exact() -> None:
    pricer = Pricer({"replay:gsm8k": ModelPrice(input_usd_per_1k=0.5, output_usd_per_1k=1.5)})
    usage = ModelUsage("replay:gsm8k", requests=3, input_tokens=300, output_tokens=100)
    assert pricer.cost_usd(usage) == 0.3
    assert pricer.quote(usage) == CostQuote(0.3, (), (("replay:gsm8k", "table"),))


def test_hosted_model_priced_from_genai_prices_offline(no_network: None) -> None:
    pricer = Pricer()
    usage = ModelUsage("openai:gpt-4o-mini", 2, 1_000_000, 1_000_000)
    # gpt-4o-mini: $0.15 / M input tokens, $0.60 / M output tokens
    assert pricer.cost_usd(usage) == 0.75
    assert pricer.quote(usage).sources == (("openai:gpt-4o-mini", "genai-prices"),)


def test_pydantic_ai_provider_names_are_mapped(no_network: None) -> None:
    usage = ModelUsage("google-gla:gemini-2.0-flash", 1, 1000, 1000)
    # gemini-2.0-flash: $0.10 / M input, $0.40 / M output
    assert Pricer().cost_usd(usage) == 0.0005


def test_table_overrides_genai_prices() -> None:
    pricer = Pricer({"openai:gpt-4o-mini": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0)})
    assert pricer.cost_usd(ModelUsage("openai:gpt-4o-mini", 1, 1000, 500)) == 2.0


def test_unknown_model_is_nan_with_reason_by_default(no_network: None) -> None:
    pricer = Pricer()
    quote = pricer.quote(ModelUsage("ollama:qwen-local", 1, 10, 10))
    assert math.isnan(quote.cost_usd)
    assert quote.reason == "unpriced_model: ollama:qwen-local"
    with pytest.raises(EvaluationError, match="unpriced_model: ollama:qwen-local"):
        pricer.cost_usd(ModelUsage("ollama:qwen-local", 1, 10, 10))


def test_unknown_model_zero_when_asked() -> None:
    pricer = Pricer(unknown="zero")
    assert pricer.cost_usd(ModelUsage("ollama:qwen-local", 1, 10, 10)) == 0.0
    assert pricer.quote(ModelUsage("ollama:qwen-local")).sources == (("ollama:qwen-local", "zero"),)


def test_in_process_fakes_are_free() -> None:
    pricer = Pricer()
    assert pricer.cost_usd(ModelUsage("test", 1, 50, 50)) == 0.0
    assert pricer.cost_usd(ModelUsage("function:f:None", 1, 50, 50)) == 0.0


def test_total_sums_and_names_every_unpriced_model() -> None:
    pricer = Pricer({"a": ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=0.0)})
    ok = pricer.total([ModelUsage("a", 1, 250, 0), ModelUsage("test", 1, 9, 9)])
    assert ok.cost_usd == 0.25
    assert ok.reason is None
    bad = pricer.total([ModelUsage("zz:m2"), ModelUsage("a", 1, 250, 0), ModelUsage("zz:m1")])
    assert math.isnan(bad.cost_usd)
    assert bad.unpriced == ("zz:m1", "zz:m2")
    assert bad.reason == "unpriced_model: zz:m1, zz:m2"


def test_total_of_nothing_is_zero() -> None:
    assert Pricer().total([]) == CostQuote(0.0)


@pytest.mark.parametrize("bad", [-0.1, math.nan, math.inf])
def test_model_price_rejects_negative_and_non_finite(bad: float) -> None:
    with pytest.raises(ValidationError):
        ModelPrice(input_usd_per_1k=bad, output_usd_per_1k=0.0)


def test_model_price_is_frozen_and_strict() -> None:
    price = ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0)
    with pytest.raises(ValidationError):
        price.input_usd_per_1k = 3.0  # type: ignore[misc]
    with pytest.raises(ValidationError):
        ModelPrice(input_usd_per_1k=1.0, output_usd_per_1k=2.0, cached=1.0)  # type: ignore[call-arg]


def test_bad_unknown_policy() -> None:
    with pytest.raises(ValueError, match="unknown must be"):
        Pricer(unknown="free")  # type: ignore[arg-type]
