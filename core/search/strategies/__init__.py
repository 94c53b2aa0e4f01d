"""Search strategies behind one interface (`Strategy`), and `get_strategy` to resolve a name.

| name                          | class               | config               | needs a model |
|-------------------------------|---------------------|----------------------|---------------|
| `meta_agent` (`meta-agent`)   | `MetaAgentSearch`   | `MetaAgentConfig`    | yes           |
| `evolutionary`                | `EvolutionarySearch`| `EvolutionaryConfig` | no            |
| `random`                      | `RandomSearch`      | `RandomConfig`       | no            |
| `exhaustive`                  | `ExhaustiveSearch`  | `ExhaustiveConfig`   | no            |
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic_ai.models import Model

from core.evaluation.pricing import Pricer
from core.search.strategies.base import (
    AskContext,
    CheckResult,
    NameInfo,
    Proposal,
    SearchSpace,
    Strategy,
    StrategyConfig,
)
from core.search.strategies.evolutionary import EvolutionaryConfig, EvolutionarySearch
from core.search.strategies.exhaustive import ExhaustiveConfig, ExhaustiveSearch
from core.search.strategies.meta_agent import MetaAgentConfig, MetaAgentSearch
from core.search.strategies.random_search import RandomConfig, RandomSearch

__all__ = [
    "STRATEGY_NAMES",
    "AskContext",
    "CheckResult",
    "EvolutionaryConfig",
    "ExhaustiveConfig",
    "ExhaustiveSearch",
    "EvolutionarySearch",
    "MetaAgentConfig",
    "MetaAgentSearch",
    "NameInfo",
    "Proposal",
    "RandomConfig",
    "RandomSearch",
    "SearchSpace",
    "Strategy",
    "StrategyConfig",
    "get_strategy",
    "strategy_config_class",
]

STRATEGY_NAMES: tuple[str, ...] = ("evolutionary", "exhaustive", "meta_agent", "random")
"""The strategy names `get_strategy` resolves (`"meta-agent"` is accepted for `meta_agent`)."""

_CONFIGS: dict[str, type[StrategyConfig]] = {
    "evolutionary": EvolutionaryConfig,
    "exhaustive": ExhaustiveConfig,
    "meta_agent": MetaAgentConfig,
    "random": RandomConfig,
}


def _canonical(name: str) -> str:
    key = name.strip().lower().replace("-", "_")
    if key not in _CONFIGS:
        raise ValueError(f"unknown strategy {name!r}; known: {', '.join(STRATEGY_NAMES)}")
    return key


def strategy_config_class(name: str) -> type[StrategyConfig]:
    """The config model of strategy `name` (e.g. to validate CLI options).

    Raises:
        ValueError: an unknown name.
    """
    return _CONFIGS[_canonical(name)]


def get_strategy(
    name: str,
    config: StrategyConfig | Mapping[str, Any] | None = None,
    *,
    model: str | Model | None = None,
    pricer: Pricer | None = None,
) -> Strategy:
    """A new strategy instance by name.

    Args:
        name: `"evolutionary"`, `"exhaustive"`, `"random"`, `"meta_agent"` or `"meta-agent"` (case-insensitive).
        config: the strategy's config model, or a mapping of its fields (validated), or None
            for the defaults.
        model: the designer's model (`meta_agent` only; required there).
        pricer: prices the designer's usage (`meta_agent` only).

    Raises:
        ValueError: an unknown name, a config of another strategy's type, or `meta_agent`
            without a model.
        pydantic.ValidationError: a config mapping with bad values.
    """
    key = _canonical(name)
    cls = _CONFIGS[key]
    if config is None:
        cfg: StrategyConfig = cls()
    elif isinstance(config, StrategyConfig):
        if not isinstance(config, cls):
            raise ValueError(
                f"strategy {key!r} takes a {cls.__name__}, got {type(config).__name__}"
            )
        cfg = config
    else:
        cfg = cls.model_validate(dict(config))
    if key == "meta_agent":
        if model is None:
            raise ValueError("the meta_agent strategy needs a designer model ('provider:model')")
        assert isinstance(cfg, MetaAgentConfig)
        return MetaAgentSearch(cfg, model=model, pricer=pricer)
    if key == "evolutionary":
        assert isinstance(cfg, EvolutionaryConfig)
        return EvolutionarySearch(cfg)
    if key == "exhaustive":
        assert isinstance(cfg, ExhaustiveConfig)
        return ExhaustiveSearch(cfg)
    assert isinstance(cfg, RandomConfig)
    return RandomSearch(cfg)
