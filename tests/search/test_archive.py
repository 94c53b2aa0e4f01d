"""Archive entries and the archive: validity (F7), de-duplication, best, front, views."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from core.evaluation.metrics import MetricBundle
from core.ir.canonical import spec_hash
from core.ir.limits import parse_topology
from core.search.archive import (
    OBJECTIVE_NAMES,
    Archive,
    ArchiveEntry,
    best_index,
    objective_matrix,
    pareto_indices,
    pareto_ranks,
    resolve_objectives,
    view_indices,
)
from core.search.pareto import DEFAULT_OBJECTIVES, Objective, dominates

NAN = float("nan")
INF = float("inf")


def spec(*agents: str, ids: bool = False) -> str:
    """A pipeline of agent steps, as JSON (with node ids when `ids`)."""
    steps = []
    for i, a in enumerate(agents):
        op: dict = {"kind": "agent_step", "agent_name": a}
        if ids:
            op["id"] = f"s{i}"
        steps.append({"operation": op})
    return json.dumps({"kind": "pipeline", "steps": steps})


def nested(depth: int, agent: str = "a") -> str:
    """A chain of `depth` nested pipelines around one agent step."""
    node: dict = {"kind": "agent_step", "agent_name": agent}
    for _ in range(depth):
        node = {"kind": "pipeline", "steps": [{"operation": node}]}
    return json.dumps(node)


def b(acc: float = 1.0, cost: float = 0.0, lat: float = 0.0, **kw: object) -> MetricBundle:
    return MetricBundle(accuracy=acc, cost_usd=cost, latency_ms=lat, **kw)  # type: ignore[arg-type]


def entry(
    spec_json: str,
    bundles: list[MetricBundle] | None = None,
    score: float | None = None,
    generation: int = 0,
    **kw: object,
) -> ArchiveEntry:
    bs = bundles if bundles is not None else [b()]
    agg = score if score is not None else (sum(x.accuracy for x in bs) / len(bs) if bs else NAN)
    return ArchiveEntry(
        generation=generation,
        spec_json=spec_json,
        bundles=bs,
        aggregate_score=agg,
        **kw,  # type: ignore[arg-type]
    )


# --- entries -----------------------------------------------------------------------------------


def test_entry_derives_hash_and_structure() -> None:
    e = entry(spec("a", "b"))
    assert e.spec_hash == spec_hash(parse_topology(spec("a", "b")))
    assert (e.n_agents, e.depth, e.n_nodes) == (2, 1, 3)
    assert e.valid and e.invalid_reason is None
    assert (e.generation, e.thought, e.parent_idx, e.split, e.n_examples) == (
        0,
        "",
        None,
        "minibatch",
        1,
    )
    # ids and key order do not change the hash
    assert entry(spec("a", "b", ids=True)).spec_hash == e.spec_hash
    assert entry(spec("b", "a")).spec_hash != e.spec_hash


def test_entry_keeps_given_derived_fields() -> None:
    e = entry(spec("a"), spec_hash="h1", n_agents=7, depth=3, n_nodes=9)
    assert (e.spec_hash, e.n_agents, e.depth, e.n_nodes) == ("h1", 7, 3, 9)


def test_entry_is_frozen_and_strict() -> None:
    e = entry(spec("a"))
    with pytest.raises(ValidationError):
        e.generation = 3  # type: ignore[misc]
    with pytest.raises(ValidationError):
        entry(spec("a"), bogus=1)
    with pytest.raises(ValidationError):
        entry(spec("a"), generation=-2)
    with pytest.raises(ValidationError, match=r"bundles\.0\.accuracy"):
        ArchiveEntry(
            generation=0, spec_json=spec("a"), bundles=[{"accuracy": "x"}], aggregate_score=1
        )
    # bundles as plain data are validated; a score given as text is still checked for NaN
    e = ArchiveEntry(
        generation=0, spec_json=spec("a"), bundles=[{"accuracy": 1}], aggregate_score="nan"
    )  # type: ignore[arg-type]
    assert e.invalid_reason == "non_finite_score: aggregate_score is nan"


def test_entry_never_shares_lists_or_dicts_with_the_caller() -> None:
    raw = {"outputs": ["4"]}
    bundle = b(raw=raw)
    bundles = [bundle]
    e = entry(spec("a"), bundles)
    bundles.append(b(0.0))
    bundles[0] = b(0.0)
    raw["outputs"].append("5")
    bundle.raw["outputs"].append("6")
    bundle.raw["new"] = 1
    assert len(e.bundles) == 1
    assert e.bundles[0].accuracy == 1.0
    assert e.bundles[0].raw == {"outputs": ["4"]}
    assert isinstance(e.bundles, tuple)
    assert e.bundles[0] is not bundle


@pytest.mark.parametrize(
    ("spec_json", "bundles", "score", "extra", "reason"),
    [
        (spec("a"), [b(1.0), b(0.0)], None, {}, None),
        (spec("a"), [b(0.0, status="error", error="boom"), b(1.0)], None, {}, None),
        # F7: a score function returning NaN for one example
        (spec("a"), [b(1.0), b(NAN)], 0.5, {}, "non_finite_metric: accuracy is nan (example 1)"),
        # F7: a cost of infinity
        (spec("a"), [b(1.0, cost=INF)], 1.0, {}, "non_finite_metric: cost_usd is inf (example 0)"),
        (spec("a"), [b(1.0, lat=-1.0)], 1.0, {}, "out_of_range_metric: latency_ms -1.0 outside >= 0 (example 0)"),
        (spec("a"), [b(0.0, status="invalid", error="score fn raised")], 0.0, {}, "invalid_example: score fn raised (example 0)"),
        (spec("a"), [b(1.0)], NAN, {}, "non_finite_score: aggregate_score is nan"),
        (spec("a"), [b(1.0)], -INF, {}, "non_finite_score: aggregate_score is -inf"),
        (spec("a"), [], NAN, {}, "not_evaluated: no examples"),
        (
            spec("a"),
            [b(0.0, status="error"), b(0.0, status="degenerate"), b(0.0, status="error")],
            0.0,
            {},
            "degenerate: all 3 examples failed (2 error, 1 blank)",
        ),
        ("{not json", [b(1.0)], 1.0, {}, "spec_unparseable: invalid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
        # the caller's reason wins (e.g. the evaluator's rejection)
        (nested(5), [], NAN, {"invalid_reason": "max_depth_exceeded: depth 5 > 4"}, "max_depth_exceeded: depth 5 > 4"),
        (spec("a"), [b(1.0)], 1.0, {"invalid_reason": "degenerate: 95% blank outputs"}, "degenerate: 95% blank outputs"),
        (spec("a"), [b(1.0)], 1.0, {"invalid_reason": ""}, None),
    ],
)  # fmt: skip
def test_entry_invalid_reason_table(
    spec_json: str, bundles: list, score: float | None, extra: dict, reason: str | None
) -> None:
    e = entry(spec_json, bundles, score, **extra)
    assert e.invalid_reason == reason
    assert e.valid is (reason is None)


def test_unparseable_specs_stay_apart() -> None:
    one = entry("{not json", [b()], 1.0)
    two = entry("{not json either", [b()], 1.0)
    assert one.spec_hash.startswith("raw:") and two.spec_hash.startswith("raw:")
    assert one.spec_hash != two.spec_hash
    assert math.isnan(one.objective("n_agents"))


def test_entry_objectives() -> None:
    e = entry(
        nested(2),
        [
            b(1.0, 0.002, 100.0, input_tokens=10, output_tokens=2, confidence=0.5),
            b(0.0, 0.004, 300.0, input_tokens=30, output_tokens=6),
        ],
        0.25,
    )
    assert e.objective("accuracy") == 0.5
    assert e.objective("cost_usd") == pytest.approx(0.003)
    assert e.objective("latency_ms") == 200.0
    assert e.objective("confidence") == 0.5  # only bundles that have one
    assert math.isnan(e.objective("robustness"))
    assert (e.objective("input_tokens"), e.objective("output_tokens")) == (20.0, 4.0)
    assert e.objective("total_tokens") == 24.0
    assert (e.objective("n_agents"), e.objective("depth"), e.objective("n_nodes")) == (1, 2, 3)
    assert e.objective("aggregate_score") == 0.25
    assert e.objective_values() == pytest.approx((0.5, 0.003, 200.0, 1.0, 2.0))
    assert e.objective_values(["depth", Objective("accuracy", "max")]) == (2.0, 0.5)
    with pytest.raises(KeyError, match="unknown objective 'speed'"):
        e.objective("speed")


def test_entry_json_round_trip_keeps_nan_and_inf() -> None:
    e = entry(spec("a"), [b(NAN, cost=INF)], NAN, thought="why", parent_idx=0, split="validation")
    back = ArchiveEntry.model_validate_json(e.model_dump_json())
    assert back.invalid_reason == e.invalid_reason
    assert math.isnan(back.bundles[0].accuracy) and back.bundles[0].cost_usd == INF
    assert math.isnan(back.aggregate_score)
    assert (back.spec_hash, back.thought, back.parent_idx, back.split) == (
        e.spec_hash,
        "why",
        0,
        "validation",
    )
    ok = entry(spec("a", "b"))
    assert ArchiveEntry.model_validate_json(ok.model_dump_json()) == ok


# --- objectives --------------------------------------------------------------------------------


def test_resolve_objectives() -> None:
    assert resolve_objectives(["accuracy", "cost_usd"]) == (
        Objective("accuracy", "max"),
        Objective("cost_usd", "min"),
    )
    assert resolve_objectives([Objective("depth", "max")]) == (Objective("depth", "max"),)
    assert set(OBJECTIVE_NAMES) >= {o.name for o in DEFAULT_OBJECTIVES}
    for bad, msg in (([], "at least one"), (["speed"], "unknown"), (["depth", "depth"], "repeat")):
        with pytest.raises(ValueError, match=msg):
            resolve_objectives(bad)
    with pytest.raises(ValueError, match="unknown"):
        resolve_objectives([Objective("speed", "max")])


# --- archive -----------------------------------------------------------------------------------


def test_archive_defaults_and_errors() -> None:
    a = Archive()
    assert (a.strategy, a.size, a.objectives) == ("top_k", 5, DEFAULT_OBJECTIVES)
    assert (len(a), a.entries, a.best_index(), a.pareto(), a.ranks(), a.view()) == (
        0,
        (),
        None,
        [],
        [],
        [],
    )
    with pytest.raises(ValueError, match=r"^the archive is empty: add\(\) an entry first$"):
        a.best()  # as the reference library documents; best_index() stays None
    assert a.serialize_for_prompt() == ""
    assert a.hypervolume() == 0.0
    with pytest.raises(ValueError, match="strategy"):
        Archive(strategy="best")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="size"):
        Archive(size=0)
    with pytest.raises(ValueError, match="unknown objective"):
        Archive(objectives=["speed"])


def test_f7_invalid_entries_never_on_the_front_and_never_best() -> None:
    a = Archive(strategy="top_k", size=5)
    good = a.add(entry(spec("a"), [b(0.6, 0.01, 100.0)], 0.5))
    # a score function returning NaN for one candidate: otherwise it would dominate everything
    nan_score = a.add(entry(spec("b"), [b(NAN, 0.0, 1.0)], 0.99))
    # a cost of infinity for another, with a high aggregate score given by a careless caller
    inf_cost = a.add(entry(spec("c"), [b(1.0, INF, 1.0)], 0.98))
    assert a[nan_score].invalid_reason == "non_finite_metric: accuracy is nan (example 0)"
    assert a[inf_cost].invalid_reason == "non_finite_metric: cost_usd is inf (example 0)"
    assert a.pareto_indices() == [good]
    assert a.pareto() == [a[good]]
    assert a.best() == a[good] and a.best_index() == good
    assert a.ranks() == [0, None, None]
    assert a.view() == [a[good]]
    assert a.hypervolume(reference=[0.0, 1.0]) == pytest.approx(0.6 * 0.99)
    assert [a.best(split=s) for s in ("minibatch", "validation")] == [a[good], None]
    assert a.pareto(objectives=["accuracy"]) == [a[good]]


def test_only_invalid_entries() -> None:
    a = Archive()
    a.add(entry(spec("a"), [b(NAN)], NAN))
    a.add(entry(spec("b"), [], NAN, invalid_reason="max_depth_exceeded: depth 5 > 4"))
    assert (a.best(), a.pareto(), a.ranks(), a.view()) == (None, [], [None, None], [])
    assert a.hypervolume() == 0.0


def test_identical_specs_are_one_entry() -> None:
    a = Archive()
    first = entry(spec("a", "b"), [b(0.5)], 0.5, generation=0, thought="first")
    i = a.add(first)
    # same topology, different ids: the first evaluation stays
    j = a.add(entry(spec("a", "b", ids=True), [b(0.9)], 0.9, generation=1, thought="again"))
    assert (i, j, len(a)) == (0, 0, 1)
    assert a[0] is first
    assert a.index_of(first.spec_hash) == 0
    assert a.index_of("nope") is None
    # re-scored on more examples (the full validation set): the evaluation is replaced
    k = a.add(
        entry(spec("a", "b"), [b(1.0), b(0.0), b(1.0)], 0.66, generation=5, split="validation")
    )
    assert (k, len(a)) == (0, 1)
    e = a[0]
    assert (e.generation, e.thought, e.split, e.n_examples, e.aggregate_score) == (
        0,
        "first",
        "validation",
        3,
        0.66,
    )
    # fewer examples: ignored
    a.add(entry(spec("a", "b"), [b(0.0)], 0.0, split="minibatch"))
    assert a[0] == e
    # a replacement can make an invalid entry valid and the other way round
    a.add(entry(spec("c"), [b(NAN)], NAN))
    assert not a[1].valid and a.pareto_indices() == [0] and a.ranks() == [0, None]
    a.add(entry(spec("c"), [b(1.0), b(1.0)], 1.0))
    assert a[1].valid and a.best_index() == 1
    assert a.pareto_indices() == [1] and a.ranks() == [1, 0]


def test_entries_is_a_snapshot() -> None:
    a = Archive()
    a.add(entry(spec("a")))
    snap = a.entries
    a.add(entry(spec("b")))
    assert len(snap) == 1 and len(a.entries) == 2
    assert list(a) == list(a.entries)


def test_best_ties_go_to_the_earliest() -> None:
    entries = [
        entry(spec("a"), score=0.5),
        entry(spec("b"), score=0.7),
        entry(spec("c"), score=0.7),
        entry(spec("d"), [b(NAN)], 0.9),
    ]
    assert best_index(entries) == 1
    assert best_index(entries[:1]) == 0
    assert best_index([]) is None
    assert best_index(entries, split="validation") is None


@pytest.mark.parametrize(
    ("strategy", "size", "expected"),
    [
        ("top_k", 2, [3, 1]),
        ("top_k", 3, [3, 1, 2]),  # ties: earliest first
        ("top_k", 10, [3, 1, 2, 0]),  # invalid entry 4 is never shown
        ("cumulative", 2, [0, 1, 2, 3, 4]),
        ("parallel", 2, [3, 4]),
        ("parallel", 10, [0, 1, 2, 3, 4]),
    ],
)
def test_views(strategy: str, size: int, expected: list[int]) -> None:
    entries = [
        entry(spec("a"), score=0.1, generation=-1),
        entry(spec("b"), score=0.5),
        entry(spec("c"), score=0.5),
        entry(spec("d"), score=0.9, generation=1),
        entry(spec("e"), [b(NAN)], 2.0, generation=1),
    ]
    assert view_indices(entries, strategy, size) == expected  # type: ignore[arg-type]
    a = Archive(strategy=strategy, size=size)  # type: ignore[arg-type]
    for e in entries:
        a.add(e)
    assert a.view() == [entries[i] for i in expected]


def test_view_errors() -> None:
    with pytest.raises(ValueError, match="size"):
        view_indices([], "top_k", 0)
    with pytest.raises(ValueError, match="strategy"):
        view_indices([], "best", 1)  # type: ignore[arg-type]


# front cases: (accuracy, cost per example, latency, agents); all depth 1
FRONT_CASES = [
    # one entry
    ([(0.5, 0.01, 100, 1)], [0]),
    # better on everything dominates
    ([(0.5, 0.01, 100, 1), (0.6, 0.005, 50, 1)], [1]),
    # trade-off: accuracy vs cost
    ([(0.5, 0.001, 100, 1), (0.9, 0.01, 100, 1), (0.4, 0.002, 100, 1)], [0, 1]),
    # equal objective values (different specs): neither dominates
    ([(0.5, 0.01, 100, 1), (0.5, 0.01, 100, 1)], [0, 1]),
    # more agents, same metrics: dominated
    ([(0.5, 0.01, 100, 1), (0.5, 0.01, 100, 2)], [0]),
    # fewer agents but slower: both
    ([(0.5, 0.01, 100, 2), (0.5, 0.01, 200, 1)], [0, 1]),
]


@pytest.mark.parametrize(("rows", "front"), FRONT_CASES)
def test_front_table(rows: list[tuple], front: list[int]) -> None:
    entries = [
        entry(spec(*[f"x{i}_{j}" for j in range(n)]), [b(acc, cost, lat)])
        for i, (acc, cost, lat, n) in enumerate(rows)
    ]
    assert pareto_indices(entries) == front
    a = Archive()
    for e in entries:
        a.add(e)
    assert a.pareto_indices() == front
    ranks = pareto_ranks(entries)
    assert [i for i, r in enumerate(ranks) if r == 0] == front


def test_front_by_split_and_objectives() -> None:
    entries = [
        entry(spec("a"), [b(0.9, 0.02)], split="validation"),
        entry(spec("b"), [b(0.5, 0.01)], split="minibatch"),
        entry(spec("c"), [b(0.4, 0.01)], split="validation"),
        entry(nested(3), [b(0.95, 0.05)], split="validation"),
    ]
    objs = ["accuracy", "cost_usd"]
    assert pareto_indices(entries, objs) == [0, 1, 3]
    assert pareto_indices(entries, objs, split="validation") == [0, 2, 3]
    assert pareto_indices(entries, ["accuracy", "cost_usd", "depth"], split="validation") == [
        0,
        2,
        3,
    ]
    assert pareto_indices(entries, ["depth"]) == [0, 1, 2]
    assert pareto_ranks(entries, objs, split="validation") == [0, None, 0, 0]
    assert pareto_ranks(entries, ["accuracy"]) == [1, 2, 3, 0]
    # an objective an entry has no value for keeps it off that front
    assert pareto_indices(entries, ["accuracy", "confidence"]) == []
    m = objective_matrix(entries, objs, split="minibatch")
    assert np.isnan(m[0]).all() and m[1].tolist() == [0.5, 0.01]


def test_hypervolume() -> None:
    a = Archive()
    a.add(entry(spec("a"), [b(0.8, 0.01)]))
    a.add(entry(spec("b"), [b(0.6, 0.005)]))
    a.add(entry(spec("c"), [b(0.5, 0.02)]))  # dominated
    # by hand, reference (0, 0.02): 0.6 * (0.02 - 0.005) + (0.8 - 0.6) * (0.02 - 0.01)
    expected = 0.6 * 0.015 + 0.2 * 0.01
    assert a.hypervolume(reference=[0.0, 0.02]) == pytest.approx(expected)
    # default reference: accuracy 0, the worst cost among valid entries (0.02)
    assert a.hypervolume() == pytest.approx(expected)
    assert a.hypervolume(["accuracy"], reference=[0.5]) == pytest.approx(0.3)
    assert a.hypervolume(["accuracy", "cost_usd", "depth"], reference=[0.0, 0.02, 2.0]) == (
        pytest.approx(expected)
    )
    with pytest.raises(ValueError, match="1 to 3"):
        a.hypervolume(["accuracy", "cost_usd", "depth", "n_agents"], reference=[0, 1, 2, 3])


def test_archive_objectives_are_used() -> None:
    a = Archive(objectives=["accuracy"])
    a.add(entry(spec("a"), [b(0.5, 0.0)]))
    a.add(entry(spec("b"), [b(0.9, 1.0)]))
    assert a.pareto_indices() == [1]
    assert a.pareto_indices(objectives=["accuracy", "cost_usd"]) == [0, 1]


ROWS = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.5, 1.0, NAN]),
        st.sampled_from([0.0, 0.01, 0.02, INF]),
        st.sampled_from([1, 2, 3]),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(ROWS)
def test_front_equals_naive_reference(rows: list[tuple]) -> None:
    entries = [
        entry(spec(*[f"x{i}_{j}" for j in range(n)]), [b(acc, cost)], 0.0)
        for i, (acc, cost, n) in enumerate(rows)
    ]
    objs = ["accuracy", "cost_usd", "n_agents"]
    dirs = ["max", "min", "min"]
    vals = [e.objective_values(objs) for e in entries]
    expected = [
        i
        for i, e in enumerate(entries)
        if e.valid
        and not any(o.valid and dominates(vals[j], vals[i], dirs) for j, o in enumerate(entries))
    ]
    assert pareto_indices(entries, objs) == expected
    for i in expected:
        assert math.isfinite(entries[i].aggregate_score)
    # the archive's cached rows give the same answers as the pure functions
    archive = Archive(objectives=objs)
    for e in entries:
        archive.add(e)
    assert archive.pareto_indices() == expected
    assert archive.ranks() == pareto_ranks(entries, objs)
    assert archive.ranks(split="validation") == [None] * len(entries)


def test_search_package_exports_these_modules() -> None:
    import core.search
    import core.search.archive
    import core.search.operators
    import core.search.pareto

    exported = {
        core.search.pareto: core.search.pareto.__all__,
        core.search.archive: core.search.archive.__all__,
        core.search.operators: [
            "BUILTIN_MERGES",
            "OPERATORS",
            "ROLES",
            "MutationContext",
            "Operator",
            "crossover",
            "is_valid_candidate",
            "mutate",
            "random_spec",
        ],
    }
    for module, names in exported.items():
        for name in names:
            assert name in core.search.__all__, name
            assert getattr(core.search, name) is getattr(module, name)
