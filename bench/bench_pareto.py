"""Benchmark: Pareto front of 100,000 random five-objective entries, and NSGA-II sorting.

Target, set when the archive was built: the front of 100,000 random five-objective entries in under
1 s (the reference implementation's pairwise scan needs 1.2 s for 2,000). Run: `python
bench/bench_pareto.py`. Prints the best of a few repeats (seconds) for each figure.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from core.search.pareto import (
    DEFAULT_OBJECTIVES,
    hypervolume,
    non_dominated_sort,
    objective_directions,
    pareto_front_mask,
)

REPEATS = 5


def best_of(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    """The fastest of `repeats` runs of `fn`, in seconds."""
    times: list[float] = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(42)
    dirs = objective_directions(DEFAULT_OBJECTIVES)  # accuracy max; the other four min

    points = rng.random((100_000, 5))
    front = pareto_front_mask(points, dirs)
    t_front = best_of(lambda: pareto_front_mask(points, dirs))
    verdict = "OK" if t_front < 1.0 else "SLOW"
    print(
        f"pareto_front_mask  100,000 x 5 random: {t_front:.3f} s "
        f"(front {int(front.sum())} rows; target < 1 s: {verdict})"
    )

    # archive-like values: integer n_agents and depth make ties common
    archive = np.column_stack(
        [
            rng.random(100_000),
            rng.random(100_000) * 0.01,
            rng.random(100_000) * 5_000,
            rng.integers(1, 8, 100_000),
            rng.integers(1, 5, 100_000),
        ]
    ).astype(float)
    t_arch = best_of(lambda: pareto_front_mask(archive, dirs))
    print(f"pareto_front_mask  100,000 x 5 archive-like (integer ties): {t_arch:.3f} s")

    pop = rng.random((2_000, 5))
    fronts = non_dominated_sort(pop, dirs)
    t_sort = best_of(lambda: non_dominated_sort(pop, dirs))
    print(f"non_dominated_sort   2,000 x 5 random: {t_sort:.3f} s ({len(fronts)} fronts)")

    pop2 = rng.random((2_000, 2))
    fronts2 = non_dominated_sort(pop2, ["max", "min"])
    t_sort2 = best_of(lambda: non_dominated_sort(pop2, ["max", "min"]))
    print(f"non_dominated_sort   2,000 x 2 random: {t_sort2:.3f} s ({len(fronts2)} fronts)")

    pts3 = rng.random((2_000, 3))
    t_hv = best_of(lambda: hypervolume(pts3, [0.0, 1.0, 1.0], ["max", "min", "min"]), 3)
    print(f"hypervolume          2,000 x 3 random: {t_hv:.3f} s")


if __name__ == "__main__":
    main()
