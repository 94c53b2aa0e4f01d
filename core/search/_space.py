"""What a search may build from (`build_search_space`) and its minibatch draws."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

from core.hydrate import AgentRegistry, CallableRegistry
from core.ir.dataflow import EffectTable
from core.search.gene import TopologyGene
from core.search.strategies.base import NameInfo, SearchSpace

__all__ = ["build_search_space", "minibatch_indices", "minibatch_size_for"]

_Z95 = 1.96
"""The 95% two-sided normal quantile."""


def minibatch_size_for(seed_accuracy: float, margin: float, floor: int, n_validation: int) -> int:
    """The fixed minibatch size for a run whose seed scored `seed_accuracy` on validation.

    The smallest n >= `floor` with `1.96 * sqrt(p * (1 - p) / n) <= margin`, i.e.
    `ceil(1.96**2 * p * (1 - p) / margin**2)`, with p clamped to [0.05, 0.95] (a seed that
    is always right or always wrong says little about the others' variance), at most
    `n_validation`. Example: p = 0.3267 (GSM8K replay's seed), margin 0.05 -> 338 -> the whole
    300-example split; margin 0.1 -> 85.
    """
    p = min(0.95, max(0.05, seed_accuracy))
    n = math.ceil(_Z95**2 * p * (1 - p) / margin**2 - 1e-9)
    return max(1, min(n_validation, max(floor, n)))


def minibatch_indices(n_validation: int, size: int, seed: int, generation: int) -> list[int]:
    """The validation positions of generation `generation`'s minibatch, ascending.

    Drawn with `random.Random(f"minibatch:{seed}:{generation}")` (string seeds are hashed with
    SHA-512 by `random`, so the draw is the same in every process), `size` of them without
    replacement; all positions when `size >= n_validation`. A run with one fixed minibatch
    (`StrategyConfig.minibatch_margin`) draws with `generation = -1` once.
    """
    if size >= n_validation:
        return list(range(n_validation))
    rng = random.Random(f"minibatch:{seed}:{generation}")
    return sorted(rng.sample(range(n_validation), size))


def build_search_space(
    gene: TopologyGene,
    *,
    callable_registry: CallableRegistry,
    agent_registry: AgentRegistry,
    roles: Mapping[str, Sequence[str]] | None = None,
    problem_description: str = "",
    effects: EffectTable | None = None,
) -> SearchSpace:
    """The names a candidate may use, with their descriptions and roles, sorted by name.

    Args:
        gene: the gene searched.
        callable_registry: registered functions (`names()`, `describe(name)`).
        agent_registry: registered agents (`names()`, `describe(name)`).
        roles: role -> callable names usable in it (a problem's `roles`). None: every callable
            has the role `"step"`.
        problem_description: shown to the designer.
        effects: what each name reads and produces (default: nothing declared).
    """
    by_name: dict[str, list[str]] = {}
    if roles is None:
        for name in callable_registry.names():
            by_name[name] = ["step"]
    else:
        for role in sorted(roles):
            for name in roles[role]:
                by_name.setdefault(name, []).append(role)
    callables = tuple(
        NameInfo(
            name=name,
            description=callable_registry.describe(name) or "",
            roles=tuple(sorted(by_name.get(name, []))),
        )
        for name in sorted(callable_registry.names())
    )
    agents = tuple(
        NameInfo(name=name, description=agent_registry.describe(name) or "")
        for name in sorted(agent_registry.names())
    )
    return SearchSpace(
        gene=gene,
        agents=agents,
        callables=callables,
        problem_description=problem_description,
        effects=effects if effects is not None else EffectTable(),
    )
