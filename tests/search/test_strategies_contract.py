"""The model-free strategies pass the shared strategy contract suite."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from strategy_contract import StrategyContract  # noqa: E402

from core.search.strategies import (  # noqa: E402
    EvolutionaryConfig,
    EvolutionarySearch,
    RandomConfig,
    RandomSearch,
    Strategy,
)


class TestEvolutionaryContract(StrategyContract):
    def make(self, seed: int) -> Strategy:
        return EvolutionarySearch(
            EvolutionaryConfig(seed=seed, n_generations=3, population_size=4, minibatch_size=4)
        )


class TestRandomContract(StrategyContract):
    def make(self, seed: int) -> Strategy:
        return RandomSearch(
            RandomConfig(seed=seed, n_generations=3, proposals_per_generation=4, minibatch_size=4)
        )
