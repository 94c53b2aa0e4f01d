"""Re-exports `core.vocab.pareto` (moved below `core.search` and `core.storage`, which both use
it, so that neither imports the other to get it). Import from `core.vocab.pareto` in new code."""

from core.vocab.pareto import (
    DEFAULT_OBJECTIVES,
    Direction,
    Objective,
    crowding_distance,
    dominates,
    hypervolume,
    non_dominated_sort,
    objective_directions,
    pareto_front_mask,
)

__all__ = [
    "DEFAULT_OBJECTIVES",
    "Direction",
    "Objective",
    "crowding_distance",
    "dominates",
    "hypervolume",
    "non_dominated_sort",
    "objective_directions",
    "pareto_front_mask",
]
