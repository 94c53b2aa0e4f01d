"""The load-time price check: every model a problem's agents run has a price, or is declared free.

A problem's cost figures are only as good as its price table: a misspelled key, or a model left
out of it, would otherwise cost $0 with no word (pydantic-ai's `FunctionModel` and `TestModel`
are free to `Pricer` by default). So `load_problem` creates each registered agent once, takes
the model name its usage is recorded under (`core.agents.agent_model_name`) and refuses the
problem when `Pricer.resolve(name, fakes_free=False)` finds no price.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

from core.agents import UNKNOWN_MODEL, agent_model_name
from core.agents.providers import BASE_URL_ENV, missing_setting
from core.errors import ProblemError
from core.evaluation.pricing import ModelPrice, Pricer
from core.hydrate import AgentRegistry

__all__ = ["REPLAY_PREFIX", "check_agent_prices", "cost_basis"]

REPLAY_PREFIX = "replay:"
"""The model-name prefix of replayed models (gsm8k_replay's `replay:175b_finetuning`, ...)."""


def cost_basis(prices: Mapping[str, object]) -> str:
    """How a problem's costs come about, from its `[models.prices]` keys: `"replayed"` when
    every priced model is a replay (`REPLAY_PREFIX`: the cost is modelled from recorded text at
    list prices, no money is spent), `"measured"` when it prices other models, `""` when it
    prices nothing. The studio's runs table and the CLI's summary both say it this way."""
    if not prices:
        return ""
    return "replayed" if all(str(k).startswith(REPLAY_PREFIX) for k in prices) else "measured"


def check_agent_prices(
    agents: AgentRegistry,
    prices: Mapping[str, ModelPrice],
    *,
    toml_path: Path,
    module_path: Path,
) -> None:
    """Refuse a problem one of whose registered agents runs an unpriced model.

    A model is priced when `prices` (`[models.prices]`) has its exact name (with prices, or
    `free = true`) or genai-prices knows it; `"function:..."` and `"test"` models need an entry.
    An agent created without a model (`"unknown"`: it gets one per run) is not checked.

    Raises:
        ProblemError: an agent's factory raised (names the agent and the module), or an agent's
            model has no price: names the agent, the model and the exact TOML key to add, e.g.
            `problem.toml: field 'models.prices."function:solve:"': agent 'solver' runs model
            'function:solve:', which has no price: add [models.prices."function:solve:"] with
            input_usd_per_1k and output_usd_per_1k (USD per 1,000 tokens), or free = true`.
    """
    pricer = Pricer(prices)
    for name in agents.names():
        try:
            agent = agents.create(name)
        except Exception as exc:
            setting = missing_setting(exc)
            why = (
                f"{type(exc).__name__}: {exc}"
                if setting is None
                else f"the {setting} environment variable is not set (set it; a local "
                f"server at {BASE_URL_ENV} needs none)"
            )
            raise ProblemError(
                f"creating agent {name!r} failed: {why}",
                file=str(module_path),
                field="build",
            ) from exc
        model = agent_model_name(agent)
        if model == UNKNOWN_MODEL or pricer.resolve(model, fakes_free=False) is not None:
            continue
        key = f'models.prices."{model}"'
        unused = sorted(set(prices) - {model})
        close = difflib.get_close_matches(model, unused, n=1, cutoff=0.8)
        hint = f" (the table has {close[0]!r}: a misspelling?)" if close else ""
        raise ProblemError(
            f"agent {name!r} runs model {model!r}, which has no price{hint}: add [{key}] with "
            "input_usd_per_1k and output_usd_per_1k (USD per 1,000 tokens), or free = true",
            file=str(toml_path),
            field=key,
        )
