"""Pareto dominance, fronts, non-dominated sorting, crowding distance and hypervolume.

Pure functions over numbers: `points` is an `(n, k)` array (n candidates, k objectives) and
`directions` says, per column, whether larger (`"max"`) or smaller (`"min"`) is better.

Invalid rows (field case F7): a row with any NaN or infinite value is invalid. It never
dominates, is never dominated into a rank, and is never on the front: `pareto_front_mask` is
False for it, `non_dominated_sort` leaves it out of every front, and `hypervolume` ignores it.

Speed: the front is computed by sorting the rows (by the sum of min-max normalized objectives,
ties by the raw values lexicographically, so that a dominator always comes before what it
dominates) and sweeping them in blocks, each block checked against the front found so far in
chunks, most dominating members first. Memory stays bounded (no n x n matrix): 100,000 random
five-objective rows take well under a second (see `bench/bench_pareto.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal, TypeAlias

import numpy as np
import numpy.typing as npt
from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass

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

Direction: TypeAlias = Literal["max", "min"]
"""`"max"`: larger is better; `"min"`: smaller is better."""

FloatArray: TypeAlias = npt.NDArray[np.float64]
BoolArray: TypeAlias = npt.NDArray[np.bool_]
IndexArray: TypeAlias = npt.NDArray[np.intp]


@dataclass(frozen=True, config=ConfigDict(extra="forbid", use_attribute_docstrings=True))
class Objective:
    """One objective of the Pareto front: an archive entry's value name and its direction.

    Positional or keyword: `Objective("accuracy", "max")`.
    """

    name: Annotated[str, Field(min_length=1)]
    """The value's name, e.g. `"accuracy"`, `"cost_usd"` (see `ArchiveEntry.objective`)."""
    direction: Direction
    """`"max"` (larger is better) or `"min"` (smaller is better)."""


DEFAULT_OBJECTIVES: tuple[Objective, ...] = (
    Objective("accuracy", "max"),
    Objective("cost_usd", "min"),
    Objective("latency_ms", "min"),
    Objective("n_agents", "min"),
    Objective("depth", "min"),
)
"""The default objectives (semantics section 8): accuracy up; cost, latency, agents, depth down."""

_BLOCK = 1024
"""Rows swept per block when computing a front."""
_CHUNK_FIRST = 32
"""Front members compared in the first step; each later step doubles, up to `_CHUNK_MAX`.
Candidates dominated by one chunk skip the rest, and the first members (smallest normalized
sums) dominate the most."""
_CHUNK_MAX = 512
_MATRIX_LIMIT = 4096
"""Up to this many valid rows, `non_dominated_sort` builds a dominance matrix (16 MB at most);
above it, it peels fronts one by one with the sweep."""


def objective_directions(objectives: Sequence[Objective]) -> list[Direction]:
    """The directions of a sequence of objectives, in order."""
    return [o.direction for o in objectives]


def _signs(directions: Sequence[str], k: int) -> FloatArray:
    dirs = list(directions)
    if len(dirs) != k:
        raise ValueError(f"{len(dirs)} directions for {k} objectives")
    bad = [d for d in dirs if d not in ("max", "min")]
    if bad:
        raise ValueError(f"directions must be 'max' or 'min', got {bad!r}")
    return np.array([-1.0 if d == "max" else 1.0 for d in dirs], dtype=np.float64)


def _to_min(points: npt.ArrayLike, directions: Sequence[str]) -> tuple[FloatArray, BoolArray]:
    """Rows as a minimization problem, and the mask of valid (all finite) rows."""
    arr = np.asarray(points, dtype=np.float64)
    if arr.ndim != 2:
        if arr.size == 0:
            arr = arr.reshape(0, len(directions))
        else:
            raise ValueError(f"points must be a 2-D (n, k) array, got shape {arr.shape}")
    x: FloatArray = arr * _signs(directions, arr.shape[1])
    valid: BoolArray = np.asarray(np.isfinite(x).all(axis=1), dtype=np.bool_)
    return x, valid


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[str]) -> bool:
    """True when `a` is at least as good as `b` on every objective and better on one.

    A point with a NaN or infinite value never dominates and is never dominated (F7).

    Raises:
        ValueError: lengths differ from `directions`, or a direction is not max/min.
    """
    x, valid = _to_min(np.array([list(a), list(b)], dtype=np.float64), directions)
    if not (valid[0] and valid[1]):
        return False
    return bool(np.all(x[0] <= x[1]) and np.any(x[0] < x[1]))


def _dominated_by_any(cands: FloatArray, doms: FloatArray) -> BoolArray:
    """For each candidate row (minimization), whether some row of `doms` dominates it."""
    le = doms[None, :, 0] <= cands[:, None, 0]
    ne = doms[None, :, 0] != cands[:, None, 0]
    for j in range(1, cands.shape[1]):
        le &= doms[None, :, j] <= cands[:, None, j]
        ne |= doms[None, :, j] != cands[:, None, j]
    out: BoolArray = (le & ne).any(axis=1)
    return out


def _sweep_order(x: FloatArray) -> IndexArray:
    """An order in which every dominator comes before the rows it dominates."""
    k = x.shape[1]
    with np.errstate(all="ignore"):
        lo = x.min(axis=0)
        span = x.max(axis=0) - lo
        span[~(span > 0)] = 1.0
        key = ((x - lo) / span).sum(axis=1)
    if not np.isfinite(key).all():  # overflow on extreme values: raw lexicographic order
        key = np.zeros(x.shape[0])
    # np.lexsort: the last key is primary. Normalizing and summing are monotone, so a dominator
    # has a key <= its victim's, and when equal it is lexicographically smaller.
    order: IndexArray = np.lexsort((*(x[:, j] for j in reversed(range(k))), key))
    return order


def _front_positions(x: FloatArray) -> IndexArray:
    """Row positions of the non-dominated rows of finite minimization rows `x`, ascending."""
    n, k = x.shape
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    if k == 0:
        return np.arange(n, dtype=np.intp)
    if k <= 2:
        return _front_positions_2d(x if k == 2 else np.column_stack([x[:, 0], x[:, 0]]))
    order = _sweep_order(x)
    s = x[order]
    front = np.empty((0, k), dtype=np.float64)
    found: list[IndexArray] = []
    for start in range(0, n, _BLOCK):
        block = s[start : start + _BLOCK]
        alive = np.arange(block.shape[0], dtype=np.intp)
        f0, size = 0, _CHUNK_FIRST
        while f0 < front.shape[0] and alive.size:
            alive = alive[~_dominated_by_any(block[alive], front[f0 : f0 + size])]
            f0, size = f0 + size, min(2 * size, _CHUNK_MAX)
        if alive.size == 0:
            continue
        # survivors may dominate each other (a point never dominates itself)
        survivors = block[alive]
        alive = alive[~_dominated_by_any(survivors, survivors)]
        front = np.concatenate([front, block[alive]])
        found.append(alive + start)
    if not found:
        return np.zeros(0, dtype=np.intp)
    positions: IndexArray = np.sort(order[np.concatenate(found)])
    return positions


def _front_positions_2d(x: FloatArray) -> IndexArray:
    """Exact O(n log n) front for two objectives: a row is dominated iff some row before its
    group of identical rows, in (x, y) order, has a y no larger than its own."""
    n = x.shape[0]
    order = np.lexsort((x[:, 1], x[:, 0]))
    xs = x[order, 0]
    ys = x[order, 1]
    new_group = np.ones(n, dtype=np.bool_)
    new_group[1:] = (xs[1:] != xs[:-1]) | (ys[1:] != ys[:-1])
    positions_all: IndexArray = np.arange(n, dtype=np.intp)
    group_start = np.maximum.accumulate(np.where(new_group, positions_all, 0))
    before = np.empty(n, dtype=np.float64)
    before[0] = np.inf
    before[1:] = np.minimum.accumulate(ys)[:-1]
    dominated = before[group_start] <= ys
    positions: IndexArray = np.sort(order[~dominated])
    return positions


def pareto_front_mask(points: npt.ArrayLike, directions: Sequence[str]) -> BoolArray:
    """Which rows are on the Pareto front (dominated by no other row).

    Args:
        points: `(n, k)` objective values.
        directions: `k` directions, `"max"` or `"min"`.

    Returns:
        A boolean mask of length n. Rows with NaN or infinite values are always False. Identical
        valid rows do not dominate each other: all copies of a non-dominated row are True.

    Raises:
        ValueError: `points` is not 2-D, or `directions` has the wrong length or a bad value.
    """
    x, valid = _to_min(points, directions)
    mask = np.zeros(x.shape[0], dtype=np.bool_)
    idx = np.flatnonzero(valid)
    mask[idx[_front_positions(x[idx])]] = True
    return mask


def _dominance_matrix(y: FloatArray) -> BoolArray:
    """`d[i, j]` = row i dominates row j (minimization), built in row blocks."""
    m = y.shape[0]
    d = np.zeros((m, m), dtype=np.bool_)
    step = 512
    for r0 in range(0, m, step):
        rows = y[r0 : r0 + step]
        # rows as dominators of every row j: transpose of "j dominated by rows"
        le = rows[:, None, 0] <= y[None, :, 0]
        ne = rows[:, None, 0] != y[None, :, 0]
        for j in range(1, y.shape[1]):
            le &= rows[:, None, j] <= y[None, :, j]
            ne |= rows[:, None, j] != y[None, :, j]
        d[r0 : r0 + step] = le & ne
    return d


def non_dominated_sort(
    points: npt.ArrayLike,
    directions: Sequence[str],
    *,
    max_points: int | None = None,
) -> list[IndexArray]:
    """Fast non-dominated sorting (NSGA-II): the rows grouped into successive fronts.

    Front 0 is the Pareto front; front r holds the rows dominated only by rows of fronts < r.

    Args:
        points: `(n, k)` objective values.
        directions: `k` directions, `"max"` or `"min"`.
        max_points: stop once the fronts returned hold at least this many rows (NSGA-II only
            needs enough fronts to fill a population). None: sort everything.

    Returns:
        One ascending array of row indices per front, best front first. Rows with NaN or
        infinite values are in no front (rank them after every front).

    Raises:
        ValueError: as `pareto_front_mask`.
    """
    x, valid = _to_min(points, directions)
    idx = np.flatnonzero(valid)
    y = x[idx]
    m = y.shape[0]
    limit = m if max_points is None else max(0, max_points)
    fronts: list[IndexArray] = []
    taken = 0
    if m <= _MATRIX_LIMIT:
        d = _dominance_matrix(y)
        count = d.sum(axis=0).astype(np.int64)
        done = np.zeros(m, dtype=np.bool_)
        current = np.flatnonzero(count == 0)
        while current.size and taken < limit:
            fronts.append(idx[current])
            taken += current.size
            done[current] = True
            count -= d[current].sum(axis=0)
            current = np.flatnonzero((count == 0) & ~done)
        return fronts
    remaining = np.arange(m, dtype=np.intp)
    while remaining.size and taken < limit:
        pos = _front_positions(y[remaining])
        fronts.append(idx[remaining[pos]])
        taken += pos.size
        keep = np.ones(remaining.size, dtype=np.bool_)
        keep[pos] = False
        remaining = remaining[keep]
    return fronts


def crowding_distance(points: npt.ArrayLike) -> FloatArray:
    """NSGA-II crowding distance of the rows of one front (larger = more isolated).

    Per objective, the rows are sorted; the two extremes get infinity and each interior row
    adds the gap between its neighbours divided by the objective's range (an objective with a
    zero range adds nothing). Directions do not matter. Ties are broken by row order.

    Args:
        points: `(n, k)` finite objective values of one front.

    Returns:
        `(n,)` distances; all infinite when n <= 2.

    Raises:
        ValueError: `points` is not 2-D or has NaN or infinite values.
    """
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2:
        if p.size == 0:
            return np.zeros(0, dtype=np.float64)
        raise ValueError(f"points must be a 2-D (n, k) array, got shape {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError("crowding_distance needs finite values (invalid rows are on no front)")
    n, k = p.shape
    dist = np.zeros(n, dtype=np.float64)
    if n <= 2:
        dist[:] = np.inf
        return dist
    for j in range(k):
        order = np.argsort(p[:, j], kind="stable")
        v = p[order, j]
        dist[order[0]] = np.inf
        dist[order[-1]] = np.inf
        span = v[-1] - v[0]
        if span > 0:
            dist[order[1:-1]] += (v[2:] - v[:-2]) / span
    return dist


def _hv2d(x: FloatArray, ref: FloatArray) -> float:
    """Area dominated by minimization rows `x` (all strictly better than `ref`), bounded by it."""
    if x.shape[0] == 0:
        return 0.0
    order = np.lexsort((x[:, 1], x[:, 0]))
    xs = x[order, 0]
    ys = x[order, 1]
    running = np.minimum.accumulate(ys)
    keep = np.ones(xs.size, dtype=np.bool_)
    keep[1:] = ys[1:] < running[:-1]
    xs = xs[keep]
    ys = ys[keep]
    widths = np.append(xs[1:], ref[0]) - xs
    return float(np.sum(widths * (ref[1] - ys)))


def _hv3d(x: FloatArray, ref: FloatArray) -> float:
    """Volume dominated by minimization rows `x`, by slicing along the third objective."""
    x = x[_front_positions(x)]
    order = np.argsort(x[:, 2], kind="stable")
    x = x[order]
    zs = np.append(x[:, 2], ref[2])
    total = 0.0
    for i in range(x.shape[0]):
        dz = zs[i + 1] - zs[i]
        if dz > 0:
            total += _hv2d(x[: i + 1, :2], ref[:2]) * dz
    return total


def hypervolume(
    points: npt.ArrayLike, reference: Sequence[float], directions: Sequence[str]
) -> float:
    """Exact hypervolume dominated by the rows, bounded by a reference point (1 to 3 objectives).

    The hypervolume is the measure of the region that is dominated by at least one row and
    dominates the reference point. Rows that do not strictly beat the reference on every
    objective add nothing; rows with NaN or infinite values are ignored (F7).

    Args:
        points: `(n, k)` objective values, k in {1, 2, 3}.
        reference: `k` finite values, worse than every row that should count (e.g. accuracy 0
            and the largest acceptable cost).
        directions: `k` directions, `"max"` or `"min"`.

    Returns:
        The hypervolume in the objectives' units multiplied together (0.0 for no rows).

    Raises:
        ValueError: k outside 1..3 (no exact algorithm here for more objectives), a reference
            of the wrong length or not finite, or bad directions.
    """
    x, valid = _to_min(points, directions)
    k = x.shape[1]
    if k not in (1, 2, 3):
        raise ValueError(f"hypervolume is exact for 1 to 3 objectives, got {k}")
    ref_raw = np.asarray(list(reference), dtype=np.float64)
    if ref_raw.shape != (k,) or not np.isfinite(ref_raw).all():
        raise ValueError(f"reference must be {k} finite values, got {list(reference)!r}")
    ref = ref_raw * _signs(directions, k)
    x = x[valid]
    x = x[(x < ref).all(axis=1)]
    if x.shape[0] == 0:
        return 0.0
    if k == 1:
        return float(ref[0] - x[:, 0].min())
    if k == 2:
        return _hv2d(x, ref)
    return _hv3d(x, ref)
