"""Pareto functions: tables of cases, property tests against a naive O(n^2) reference."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.search.pareto import (
    DEFAULT_OBJECTIVES,
    Objective,
    crowding_distance,
    dominates,
    hypervolume,
    non_dominated_sort,
    objective_directions,
    pareto_front_mask,
)

NAN = float("nan")
INF = float("inf")

# small integer grids make ties and duplicates common, which is where fronts go wrong
values = st.sampled_from([0.0, 1.0, 2.0, 3.0])
directions_st = st.sampled_from(["max", "min"])


@st.composite
def point_sets(draw: st.DrawFn, max_n: int = 40, with_invalid: bool = True) -> tuple:
    k = draw(st.integers(1, 4))
    n = draw(st.integers(0, max_n))
    cell = st.one_of(values, st.sampled_from([NAN, INF, -INF])) if with_invalid else values
    rows = draw(st.lists(st.lists(cell, min_size=k, max_size=k), min_size=n, max_size=n))
    dirs = draw(st.lists(directions_st, min_size=k, max_size=k))
    pts = np.array(rows, dtype=float).reshape(n, k)
    return pts, dirs


def naive_dominates(a: list[float], b: list[float], dirs: list[str]) -> bool:
    """Plain-Python dominance (an independent reference): NaN/inf rows never dominate."""
    if not all(math.isfinite(v) for v in (*a, *b)):
        return False
    s = [-1.0 if d == "max" else 1.0 for d in dirs]
    x = [v * w for v, w in zip(a, s, strict=True)]
    y = [v * w for v, w in zip(b, s, strict=True)]
    return all(p <= q for p, q in zip(x, y, strict=True)) and x != y


def naive_front(pts: np.ndarray, dirs: list[str]) -> np.ndarray:
    rows = pts.tolist()
    return np.array(
        [
            all(math.isfinite(v) for v in r) and not any(naive_dominates(o, r, dirs) for o in rows)
            for r in rows
        ],
        dtype=bool,
    )


def naive_sort(pts: np.ndarray, dirs: list[str]) -> list[list[int]]:
    rows = pts.tolist()
    left = [i for i, r in enumerate(rows) if all(math.isfinite(v) for v in r)]
    fronts = []
    while left:
        front = [i for i in left if not any(naive_dominates(rows[j], rows[i], dirs) for j in left)]
        fronts.append(front)
        left = [i for i in left if i not in front]
    return fronts


# --- objectives --------------------------------------------------------------------------------


def test_default_objectives() -> None:
    assert [(o.name, o.direction) for o in DEFAULT_OBJECTIVES] == [
        ("accuracy", "max"),
        ("cost_usd", "min"),
        ("latency_ms", "min"),
        ("n_agents", "min"),
        ("depth", "min"),
    ]
    assert objective_directions(DEFAULT_OBJECTIVES) == ["max", "min", "min", "min", "min"]
    assert Objective("x", "min") == Objective(name="x", direction="min")
    with pytest.raises(ValueError):
        Objective("x", "up")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Objective("", "max")


# --- dominance ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "dirs", "expected"),
    [
        ([1, 1], [1, 1], ["min", "min"], False),  # irreflexive
        ([0, 1], [1, 1], ["min", "min"], True),
        ([1, 1], [0, 1], ["min", "min"], False),
        ([0, 2], [1, 1], ["min", "min"], False),  # incomparable
        ([1, 1], [0, 1], ["max", "min"], True),
        ([0.9, 0.01], [0.8, 0.02], ["max", "min"], True),
        ([NAN, 0], [1, 1], ["min", "min"], False),  # F7: NaN never dominates
        ([1, 1], [NAN, 5], ["min", "min"], False),  # ... and is never dominated
        ([0, -INF], [1, 1], ["min", "min"], False),  # -inf cost is invalid, not "free"
        ([1, 1], [1, INF], ["min", "min"], False),
    ],
)
def test_dominates_table(a: list, b: list, dirs: list[str], expected: bool) -> None:
    assert dominates(a, b, dirs) is expected


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="directions"):
        pareto_front_mask(np.zeros((3, 2)), ["min"])
    with pytest.raises(ValueError, match="'max' or 'min'"):
        pareto_front_mask(np.zeros((3, 2)), ["min", "down"])
    with pytest.raises(ValueError, match="2-D"):
        pareto_front_mask(np.zeros(3), ["min"])
    with pytest.raises(ValueError, match="directions"):
        dominates([1, 2], [1, 2], ["min"])


@given(st.integers(1, 4).flatmap(lambda k: st.tuples(*(st.lists(values, min_size=k, max_size=k) for _ in range(3)), st.lists(directions_st, min_size=k, max_size=k))))  # fmt: skip
def test_dominance_is_a_strict_partial_order(case: tuple) -> None:
    a, b, c, dirs = case
    assert not dominates(a, a, dirs)  # irreflexive
    assert not (dominates(a, b, dirs) and dominates(b, a, dirs))  # antisymmetric
    if dominates(a, b, dirs) and dominates(b, c, dirs):  # transitive
        assert dominates(a, c, dirs)


# --- fronts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pts", "dirs", "mask"),
    [
        ([], ["min", "min"], []),
        ([[1, 1]], ["min", "min"], [True]),
        ([[1, 1], [1, 1]], ["min", "min"], [True, True]),  # duplicates are both on the front
        ([[0, 1], [1, 0], [1, 1]], ["min", "min"], [True, True, False]),
        ([[0, 1], [1, 0], [1, 1]], ["max", "max"], [False, False, True]),
        ([[0.9, 0.02], [0.8, 0.01], [0.7, 0.03]], ["max", "min"], [True, True, False]),
        ([[2], [1], [1], [3]], ["min"], [False, True, True, False]),
        # F7: NaN accuracy and an infinite cost are off the front, whatever their other values
        ([[NAN, 0.0], [1.0, INF], [0.5, 0.1]], ["max", "min"], [False, False, True]),
        ([[NAN, NAN]], ["max", "min"], [False]),
    ],
)
def test_front_table(pts: list, dirs: list[str], mask: list[bool]) -> None:
    got = pareto_front_mask(np.array(pts, dtype=float).reshape(len(pts), len(dirs)), dirs)
    assert got.tolist() == mask


@settings(max_examples=200, deadline=None)
@given(point_sets())
def test_front_equals_naive_reference(case: tuple) -> None:
    pts, dirs = case
    mask = pareto_front_mask(pts, dirs)
    assert mask.tolist() == naive_front(pts, dirs).tolist()


@settings(max_examples=200, deadline=None)
@given(point_sets(with_invalid=False))
def test_front_properties(case: tuple) -> None:
    pts, dirs = case
    mask = pareto_front_mask(pts, dirs)
    front = pts[mask]
    for i in range(pts.shape[0]):
        if mask[i]:  # no front member is dominated by any point
            assert not any(naive_dominates(p, pts[i].tolist(), dirs) for p in pts.tolist())
        else:  # every other point is dominated by some front member
            assert any(naive_dominates(f, pts[i].tolist(), dirs) for f in front.tolist())
    if pts.shape[0]:
        assert mask.any()


def test_front_large_random_matches_blockwise_reference() -> None:
    # more rows than one sweep block, so blocks and chunks are both exercised
    rng = np.random.default_rng(7)
    dirs = ["max", "min", "min", "max"]
    sign = np.array([-1.0, 1.0, 1.0, -1.0])
    # built in minimization terms: random rows in 15..26, and a quarter on the plane
    # p0 + p1 + p2 + p3 = 27 (p0..p2 in 0..9), which no random row can dominate: a front of
    # hundreds, so candidates are checked against many chunks of front members
    x = rng.integers(15, 27, size=(2500, 4)).astype(float)
    plane = rng.integers(0, 10, size=(625, 3)).astype(float)
    x[:625, :3] = plane
    x[:625, 3] = 27 - plane.sum(axis=1)
    x = x[rng.permutation(2500)]
    x[rng.integers(0, 2500, 50), rng.integers(0, 4, 50)] = NAN
    pts = x * sign
    valid = np.isfinite(x).all(axis=1)
    expected = np.zeros(len(x), dtype=bool)
    for i in np.flatnonzero(valid):
        others = x[valid]
        dom = (others <= x[i]).all(axis=1) & (others < x[i]).any(axis=1)
        expected[i] = not dom.any()
    assert expected.sum() > 200
    assert pareto_front_mask(pts, dirs).tolist() == expected.tolist()


def test_front_random_uniform_five_objectives() -> None:
    rng = np.random.default_rng(0)
    pts = rng.random((3000, 5))
    mask = pareto_front_mask(pts, ["min"] * 5)
    front = pts[mask]
    rest = pts[~mask]
    # every dominated row has a dominator on the front, no front row has any dominator
    for row in rest[:200]:
        assert ((front <= row).all(axis=1) & (front < row).any(axis=1)).any()
    for row in front:
        assert not ((pts <= row).all(axis=1) & (pts < row).any(axis=1)).any()


# --- non-dominated sort ------------------------------------------------------------------------


def test_sort_table() -> None:
    pts = np.array([[0, 3], [1, 1], [3, 0], [2, 2], [3, 3], [NAN, 0], [2, 2]], dtype=float)
    fronts = non_dominated_sort(pts, ["min", "min"])
    assert [f.tolist() for f in fronts] == [[0, 1, 2], [3, 6], [4]]
    assert [f.tolist() for f in non_dominated_sort(pts, ["min", "min"], max_points=3)] == [
        [0, 1, 2]
    ]
    assert [f.tolist() for f in non_dominated_sort(pts, ["min", "min"], max_points=4)] == [
        [0, 1, 2],
        [3, 6],
    ]
    assert non_dominated_sort(np.zeros((0, 2)), ["min", "min"]) == []


@settings(max_examples=200, deadline=None)
@given(point_sets())
def test_sort_equals_naive_reference(case: tuple) -> None:
    pts, dirs = case
    got = [f.tolist() for f in non_dominated_sort(pts, dirs)]
    assert got == naive_sort(pts, dirs)
    front = np.flatnonzero(pareto_front_mask(pts, dirs)).tolist()
    assert (got[0] if got else []) == front


def test_sort_peeling_path_equals_matrix_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import core.vocab.pareto as pareto

    rng = np.random.default_rng(3)
    pts = rng.integers(0, 8, size=(600, 3)).astype(float)
    dirs = ["min", "max", "min"]
    by_matrix = [f.tolist() for f in non_dominated_sort(pts, dirs)]
    monkeypatch.setattr(pareto, "_MATRIX_LIMIT", 10)
    by_peeling = [f.tolist() for f in non_dominated_sort(pts, dirs)]
    assert by_matrix == by_peeling
    assert sorted(itertools.chain.from_iterable(by_matrix)) == list(range(600))


# --- crowding distance -------------------------------------------------------------------------


def test_crowding_distance_table() -> None:
    pts = np.array([[0.0, 4.0], [1.0, 3.0], [2.0, 1.0], [4.0, 0.0]])
    d = crowding_distance(pts)
    assert d[0] == INF and d[3] == INF
    # neighbour gaps over ranges: row 1: x (2 - 0) / 4, y (4 - 1) / 4; row 2: (4 - 1) / 4, (3 - 0) / 4
    assert d[1] == 2 / 4 + 3 / 4
    assert d[2] == 3 / 4 + 3 / 4
    assert crowding_distance(np.array([[1.0, 2.0], [2.0, 1.0]])).tolist() == [INF, INF]
    assert crowding_distance(np.zeros((0, 2))).tolist() == []
    # a constant objective adds nothing
    flat = crowding_distance(np.array([[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]]))
    assert flat[1] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="finite"):
        crowding_distance(np.array([[NAN, 1.0], [0.0, 0.0], [1.0, 1.0]]))


# --- hypervolume -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pts", "ref", "dirs", "expected"),
    [
        ([], [1, 1], ["min", "min"], 0.0),
        ([[0, 0]], [1, 1], ["min", "min"], 1.0),
        ([[0.5, 0.5]], [1, 1], ["min", "min"], 0.25),
        # staircase: 1x3 + 1x2 + 1x1 over ref (3, 3)... areas by hand
        ([[0, 2], [1, 1], [2, 0]], [3, 3], ["min", "min"], 1 * 1 + 1 * 2 + 1 * 3),
        ([[0, 2], [1, 1], [2, 0], [2, 2]], [3, 3], ["min", "min"], 6.0),  # dominated adds 0
        ([[0, 2], [0, 2]], [3, 3], ["min", "min"], 3.0),  # duplicates count once
        ([[4, 0]], [3, 3], ["min", "min"], 0.0),  # beyond the reference
        ([[3, 0]], [3, 3], ["min", "min"], 0.0),  # on the reference
        # accuracy up, cost down: (0.8, 0.01) and (0.6, 0.005) against (0, 0.02)
        ([[0.8, 0.01], [0.6, 0.005]], [0.0, 0.02], ["max", "min"], 0.6 * 0.015 + 0.2 * 0.01),
        ([[NAN, 0.0], [0.5, INF], [0.5, 0.5]], [0.0, 1.0], ["max", "min"], 0.25),  # F7
        ([[2], [1]], [5], ["min"], 4.0),
        ([[1, 1, 1]], [2, 2, 2], ["min", "min", "min"], 1.0),
        ([[0, 0, 0]], [2, 3, 4], ["min", "min", "min"], 24.0),
        # two boxes [1,2]^3 and [0,2]x[0,2]x[1.5,2]: 1 + 4*0.5 - overlap 1*0.5
        ([[1, 1, 1], [0, 0, 1.5]], [2, 2, 2], ["min", "min", "min"], 1 + 2 - 0.5),
        # unit corners: three boxes of 2x1x1 style, union by inclusion-exclusion
        (
            [[0, 1, 1], [1, 0, 1], [1, 1, 0]],
            [2, 2, 2],
            ["min", "min", "min"],
            3 * 2 - 3 * 1 + 1,
        ),
        ([[1, 1, 1]], [0, 0, 0], ["max", "max", "max"], 1.0),
    ],
)
def test_hypervolume_table(pts: list, ref: list, dirs: list[str], expected: float) -> None:
    arr = np.array(pts, dtype=float).reshape(len(pts), len(dirs))
    assert hypervolume(arr, ref, dirs) == pytest.approx(expected, abs=1e-12)


def test_hypervolume_errors() -> None:
    with pytest.raises(ValueError, match="1 to 3"):
        hypervolume(np.zeros((1, 4)), [1, 1, 1, 1], ["min"] * 4)
    with pytest.raises(ValueError, match="reference"):
        hypervolume(np.zeros((1, 2)), [1.0, INF], ["min", "min"])
    with pytest.raises(ValueError, match="reference"):
        hypervolume(np.zeros((1, 2)), [1.0], ["min", "min"])


def grid_volume(pts: np.ndarray, ref: list[float]) -> float:
    """Hypervolume by counting unit cells of an integer grid (minimization, ref on the grid)."""
    total = 0
    for cell in itertools.product(*(range(int(r)) for r in ref)):
        c = np.array(cell, dtype=float)
        if any((p <= c).all() for p in pts if np.isfinite(p).all()):
            total += 1
    return float(total)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 3).flatmap(lambda k: st.lists(st.lists(values, min_size=k, max_size=k), max_size=12)), st.data())  # fmt: skip
def test_hypervolume_matches_grid_count_and_is_monotone(rows: list, data: st.DataObject) -> None:
    if not rows:
        return
    k = len(rows[0])
    pts = np.array(rows, dtype=float)
    ref = [4.0] * k
    hv = hypervolume(pts, ref, ["min"] * k)
    assert hv == grid_volume(pts, ref)
    extra = data.draw(st.lists(values, min_size=k, max_size=k))
    more = np.vstack([pts, np.array(extra, dtype=float)])
    assert hypervolume(more, ref, ["min"] * k) >= hv


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=15),
    st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 1)),
)
def test_hypervolume_3d_monotone_on_real_values(rows: list, extra: tuple) -> None:
    pts = np.array(rows)
    dirs = ["max", "min", "min"]
    ref = [0.0, 1.0, 1.0]
    hv = hypervolume(pts, ref, dirs)
    hv_more = hypervolume(np.vstack([pts, [extra]]), ref, dirs)
    assert hv_more >= hv - 1e-12
    assert 0.0 <= hv <= 1.0 + 1e-12
    assert not math.isnan(hv)
