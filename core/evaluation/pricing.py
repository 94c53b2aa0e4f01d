"""Pricing model usage in USD: a problem's price table first, then genai-prices' offline data.

Cost in this project is real: the evaluator sums every model call's usage (structured-output
retries included, see `core.runtime.tracing.record_usage`) and prices it per model here.

Resolution order for a usage's `model_name` (first match wins):

1. the **price table** passed to `Pricer` (exact model name, e.g. a replay model `"replay:gsm8k"`
   or a local `"ollama:qwen2.5:7b"`), usually parsed from a problem's TOML by the problem loader;
   an entry may declare its model free (`ModelPrice(free=True)`, TOML `free = true`);
2. pydantic-ai's in-process fakes, `"test"` and `"function:..."` (`TestModel`, `FunctionModel`):
   free, since nothing is billed (put them in the table to give them a price, e.g. in tests);
3. **genai-prices** (the bundled data snapshot that ships in the package; no network call is
   made), with provider and model parsed from a pydantic-ai `"provider:model"` string (pydantic-ai
   provider names are mapped to genai-prices ids, e.g. `google-gla` -> `google`); a bare name
   lets genai-prices guess the provider from the model name;
4. otherwise the model is **unpriced**. With `unknown="error"` (the default) its cost is NaN with
   the reason `"unpriced_model: <name>"`, which makes the evaluation invalid with that reason
   rather than silently free; `cost_usd` raises. With `unknown="zero"` it costs 0.0 (an explicit
   choice, e.g. for a free local model).

A problem is stricter: `core.problems.load_problem` refuses a problem one of whose agents runs
a model that `Pricer.resolve(name, fakes_free=False)` cannot price (no table entry, not in
genai-prices), naming the model and the table key to add, so nothing of a problem is ever
silently free. The key is the model name as recorded in usage (`core.agents.model_name`):
`"provider:model"` for a hosted model (e.g. `"openai:gpt-4o-mini"`), `"function:<fn>:"` for
`FunctionModel(fn)` (`"function:<fn>:<stream_fn>"` with a stream function, or
`"function:<model_name>"` for `FunctionModel(fn, model_name=...)`), `"test"` for `TestModel`.

Prices from genai-prices are those in force at the time of pricing (its data carries dated
price changes), so re-pricing an old run later may differ slightly; the table is fixed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal, Self

from genai_prices import Usage, calc_price
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from core.errors import EvaluationError
from core.runtime.tracing import ModelUsage

__all__ = ["CostQuote", "ModelPrice", "Pricer", "PriceSource"]

PriceSource = Literal["table", "free", "genai-prices", "unpriced", "zero"]
"""Where a price came from: the table, a model declared free in the table or a free in-process
fake, genai-prices, nowhere (NaN), or nowhere but counted as zero (`unknown="zero"`)."""

_PROVIDER_ALIASES: dict[str, str] = {
    "google-gla": "google",
    "google-vertex": "google",
    "gemini": "google",
    "vertexai": "google",
    "bedrock": "aws",
    "xai": "x-ai",
    "grok": "x-ai",
    "openai-chat": "openai",
    "openai-responses": "openai",
}
"""pydantic-ai provider names whose genai-prices provider id differs."""

_FREE_PROVIDERS = frozenset({"test", "function"})
"""pydantic-ai's in-process fake models (`TestModel` is named `"test"`, `FunctionModel`
`"function:<fn>:<stream_fn>"`): they call no service, so they cost nothing by default."""


class ModelPrice(BaseModel):
    """The price of one model, per 1,000 tokens, in USD: both prices, or `free=True` alone.

    Raises:
        ValidationError: neither both prices nor `free=True` are given, or `free=True` comes
            with a price.
    """

    model_config = ConfigDict(
        frozen=True, extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False
    )

    input_usd_per_1k: float = Field(default=0.0, ge=0)
    """USD per 1,000 prompt (input) tokens; finite, >= 0 (required unless `free`)."""
    output_usd_per_1k: float = Field(default=0.0, ge=0)
    """USD per 1,000 completion (output) tokens; finite, >= 0 (required unless `free`)."""
    free: bool = False
    """True: the model is declared free (a local model, a `FunctionModel`): it costs $0 and
    gives no price."""

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # `free` only when set: a priced model dumps as before (problem config hashes unchanged)
        data: dict[str, Any] = handler(self)
        if not self.free:
            data.pop("free", None)
        return data

    @model_validator(mode="after")
    def _prices_or_free(self) -> Self:
        given = {"input_usd_per_1k", "output_usd_per_1k"} & self.model_fields_set
        if self.free and given:
            raise ValueError(
                "a model declared free = true takes no price: remove " + ", ".join(sorted(given))
            )
        if not self.free and len(given) < 2:
            raise ValueError(
                "give both input_usd_per_1k and output_usd_per_1k (USD per 1,000 tokens), or "
                "free = true to declare the model free"
            )
        return self


@dataclass(frozen=True, slots=True)
class CostQuote:
    """The price of some usage.

    Attributes:
        cost_usd: the cost in USD; NaN when a model is unpriced and `unknown="error"`.
        unpriced: names of models that could not be priced, sorted (empty when all were).
        sources: where each model's price came from, model name -> `PriceSource`.
    """

    cost_usd: float
    unpriced: tuple[str, ...] = ()
    sources: tuple[tuple[str, PriceSource], ...] = ()

    @property
    def reason(self) -> str | None:
        """`"unpriced_model: a, b"` when some model was unpriced, else None."""
        return f"unpriced_model: {', '.join(self.unpriced)}" if self.unpriced else None


def _split_model_name(model_name: str) -> tuple[str | None, str]:
    """`"openai:gpt-4o"` -> `("openai", "gpt-4o")`; `"gpt-4o"` -> `(None, "gpt-4o")`."""
    provider, sep, model = model_name.partition(":")
    if not sep or not provider or not model:
        return None, model_name
    provider = provider.strip().lower()
    if provider.startswith("gateway/"):  # pydantic-ai's gateway: "gateway/openai:gpt-4o"
        provider = provider.removeprefix("gateway/")
    return _PROVIDER_ALIASES.get(provider, provider), model


def _table_cost(price: ModelPrice, usage: ModelUsage) -> float:
    # Decimal arithmetic from the prices' shortest repr, so 300 tokens at 0.5/1k is exactly 0.15
    cost = (
        Decimal(repr(price.input_usd_per_1k)) * usage.input_tokens
        + Decimal(repr(price.output_usd_per_1k)) * usage.output_tokens
    ) / 1000
    return float(cost)


class Pricer:
    """Prices `ModelUsage` per model: the table, free fakes, genai-prices, else unpriced.

    Args:
        table: exact model name -> `ModelPrice` (e.g. a problem's price table for replay or
            local models). Checked before anything else, so it can also override genai-prices.
        unknown: what an unpriced model costs: `"error"` (default) gives NaN with the reason
            `"unpriced_model: <name>"` in `quote`/`total` (the evaluation becomes invalid) and
            makes `cost_usd` raise; `"zero"` counts it as free.

    Raises:
        ValueError: `unknown` is neither `"error"` nor `"zero"`.
    """

    def __init__(
        self,
        table: Mapping[str, ModelPrice] | None = None,
        *,
        unknown: Literal["error", "zero"] = "error",
    ) -> None:
        if unknown not in ("error", "zero"):
            raise ValueError(f"unknown must be 'error' or 'zero', got {unknown!r}")
        self._table: dict[str, ModelPrice] = dict(table or {})
        self._unknown: Literal["error", "zero"] = unknown

    @property
    def table(self) -> dict[str, ModelPrice]:
        """A copy of the price table."""
        return dict(self._table)

    @property
    def unknown(self) -> Literal["error", "zero"]:
        """The policy for unpriced models."""
        return self._unknown

    def resolve(self, model_name: str, *, fakes_free: bool = True) -> PriceSource | None:
        """Where `model_name`'s price would come from, without pricing any usage.

        Args:
            model_name: the model as recorded in usage (see the module docstring for the forms).
            fakes_free: False: pydantic-ai's fakes (`"test"`, `"function:..."`) are not free
                unless the table says so (how a problem's agents are checked at load time).

        Returns:
            `"table"`, `"free"` or `"genai-prices"`; None when the model is unpriced.
        """
        price = self._table.get(model_name)
        if price is not None:
            return "free" if price.free else "table"
        provider, model = _split_model_name(model_name)
        if model_name == "test" or provider in _FREE_PROVIDERS:
            return "free" if fakes_free else None
        try:
            calc_price(Usage(input_tokens=0, output_tokens=0), model, provider_id=provider)
        except LookupError:
            if provider is None:
                return None
            try:
                calc_price(Usage(input_tokens=0, output_tokens=0), model)
            except LookupError:
                return None
        return "genai-prices"

    def _price_one(self, usage: ModelUsage) -> tuple[float, PriceSource]:
        name = usage.model_name
        price = self._table.get(name)
        if price is not None:
            return _table_cost(price, usage), "free" if price.free else "table"
        provider, model = _split_model_name(name)
        if name == "test" or provider in _FREE_PROVIDERS:
            return 0.0, "free"
        try:
            calc = calc_price(
                Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
                model,
                provider_id=provider,
            )
        except LookupError:
            if provider is None:
                return self._unpriced()
            try:  # a provider genai-prices does not know (e.g. a proxy): match by model name
                calc = calc_price(
                    Usage(input_tokens=usage.input_tokens, output_tokens=usage.output_tokens),
                    model,
                )
            except LookupError:
                return self._unpriced()
        return float(calc.total_price), "genai-prices"

    def _unpriced(self) -> tuple[float, PriceSource]:
        return (math.nan, "unpriced") if self._unknown == "error" else (0.0, "zero")

    def quote(self, usage: ModelUsage) -> CostQuote:
        """Price one model's usage, never raising.

        Returns:
            A `CostQuote`; its `cost_usd` is NaN and `reason` names the model when it is
            unpriced under `unknown="error"`.
        """
        cost, source = self._price_one(usage)
        unpriced = (usage.model_name,) if source == "unpriced" else ()
        return CostQuote(cost, unpriced, ((usage.model_name, source),))

    def total(self, usages: Iterable[ModelUsage]) -> CostQuote:
        """Price several models' usage (e.g. `Trace.usage_by_model().values()`) and sum, USD.

        Returns:
            The summed `CostQuote`; NaN cost and every unpriced model named when any is unpriced
            under `unknown="error"`.
        """
        total = 0.0
        unpriced: list[str] = []
        sources: list[tuple[str, PriceSource]] = []
        for usage in usages:
            cost, source = self._price_one(usage)
            sources.append((usage.model_name, source))
            if source == "unpriced":
                unpriced.append(usage.model_name)
            total += cost
        return CostQuote(total, tuple(sorted(set(unpriced))), tuple(sources))

    def cost_usd(self, usage: ModelUsage) -> float:
        """The cost of one model's usage in USD.

        Raises:
            EvaluationError: the model is unpriced and `unknown="error"`; the message is
                `"unpriced_model: <name>"`.
        """
        quote = self.quote(usage)
        if quote.reason is not None:
            raise EvaluationError(quote.reason)
        return quote.cost_usd
