"""Search: Pareto functions, the archive and structural mutation operators (others extend this)."""

from core.search.pareto import (
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
