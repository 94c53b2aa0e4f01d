"""Search benchmarks: engine overhead, and the structure-search acceptance bench on gsm8k_replay.

(a) Engine overhead: an evolutionary search over function steps that do nothing (no model, no
    sleep), 4 examples per candidate: what the loop itself costs per candidate, in ms.
(b) Acceptance of the structure search (cascades, agreement gates and votes found offline, evolution
    ahead of random, measured against the exhaustive front): on gsm8k_replay at time scale 0,
    `exhaustive` once (it is deterministic) with the node bound `--max-nodes` (default 7) and the
    grammar `core.search.strategies.exhaustive.BENCH_GRAMMAR` (registered merges only, parallels of
    agents, agents first or as escalations, the agreement condition, always a fallback: 652
    topologies at 7 nodes, the 7-node agreement gate of two agents escalating to a third among
    them), every candidate on the full validation split; then `evolutionary` and `random` at the
    problem's default budget (`[search]`: 48 evaluations) on seeds `--seeds` (default 1-5).

    Per strategy it prints: the hypervolume on (accuracy up, cost USD per problem down) of the
    validation front (every candidate scored on the full validation split), as a ratio to the
    exhaustive front's: mean, min..max and stdev over seeds; the reference point is fixed for
    every run: accuracy 0 and 1.1 x the cost per problem of the dearest single agent (measured
    in the exhaustive run: every single agent is a 2-node topology); best validation accuracy at
    cost caps $0.01, $0.1 and $1 per problem; evaluations, new model requests (sum of
    `ExampleEvaluated.requests`: cache hits make none), the call cache's hit rate when the
    evaluator exposes counters (else n/a); wall time and the share of it spent re-scoring at the
    end of the run (from the events: the last `ArchiveSnapshot` before the "re-scored N
    candidate(s)" log line, to that line). Then the acceptance targets, PASS or FAIL each
    (evolutionary >= 0.99 of the exhaustive hypervolume on every seed, its mean above random's
    by more than random's spread, re-scoring <= 20% of wall time, the default search <= 60 s on
    2 cores), and the
    demo's short search (`topology-studio demo`: evolutionary, seed 1, 10 evaluations,
    minibatch 10): does its front hold a cascade (a router with an identity accept route) or a
    vote (`merge_vote`, or a vote step)?

    With `--test-front`, each run's validation front is also scored on the held-out test split,
    and a line per seed gives the mean validation - test gap over it, the best hand-built
    agreement gate on test and the best other point at or below its test cost, with the paired
    bootstrap interval of the difference (`_test_figures`). Measured 2026-12-07 with
    `--skip-exhaustive --strategies evolutionary --test-front --seeds 1 2 3 4 5` (train 300,
    validation 300, test 719): gap -1.43 to -1.66 points; best gate 0.5772 at $1.497 on every
    seed; best other point at most its cost 0.5410-0.5466, -3.06 to -3.62 points, every interval
    below zero (docs/honest-front.md; `bench/bench_learned.py` measures why).

(c) The default offline search (the performance acceptance: at most 10 s warm on 2 cores, peak
    RSS at most 300 MiB, results unchanged): `topology-studio search gsm8k_replay` exactly as a
    newcomer types it (the problem's defaults: evolutionary, seed 42, 48 evaluations, the
    held-out test of the validation front, `[search] workers = "auto"`), run twice as a child
    process on a fresh database: `cold` (an empty call cache) and `warm` (the call cache the
    first run left beside the database, `<db>.calls.duckdb`: every call is a hit). Per run it
    prints wall time, CPU time (user + system of the child and its forked workers), peak RSS
    (`ru_maxrss`, the largest process, read by a fresh launcher process so the bench's own
    memory is not counted) and the peak PSS of the whole process tree (the CLI and its forked
    evaluation workers, sampled every 50 ms; see `_LAUNCHER`), then whether the run's results
    are identical to `BASELINE` (the same command's results, see there: every candidate's
    figures, both fronts, the winner, and every journalled per-example record but its
    timestamp and output summary text, latency included) and to each other.
    `--write-baseline DB RUN` records a run as that baseline. Targets: warm <= 10 s wall, peak
    RSS and the tree's peak PSS <= 300 MiB, identical results.

Usage: `python bench/bench_search.py [--skip-gsm8k] [--candidates N] [--seeds 1 2 3 4 5]
[--max-nodes 7] [--strategies evolutionary random] [--skip-exhaustive --exhaustive-hv X]
[--test-front] [--bridge-order learned mix cascade] [--default-search-only]`.
Needs `TOPOLOGY_STUDIO_DATASETS` (or the dataset cache) for (b).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.agents.call_cache import InMemoryCallCache
from core.errors import DatasetError, ProblemError
from core.evaluation.cache import InMemoryEvaluationCache
from core.evaluation.evaluator import TopologyEvaluator
from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.ir import parse_topology
from core.ir.models import AnyNode, FunctionStepSpec, ParallelSpec, RouterSpec, walk
from core.problems import load_problem
from core.problems.problem import Problem
from core.runtime.tracing import record_model_latency
from core.search.budget import Budget
from core.search.engine import SearchRun, build_search
from core.search.events import (
    ArchiveSnapshot,
    ExampleEvaluated,
    LogMessage,
    SearchEvent,
)
from core.search.gene import TopologyGene
from core.search.noise import paired_bootstrap
from core.search.pareto import hypervolume, pareto_front_mask
from core.search.result import OptimizationResult
from core.search.strategies import EvolutionaryConfig, EvolutionarySearch, Strategy
from core.search.strategies.exhaustive import BENCH_GRAMMAR

CAPS_USD = (0.01, 0.1, 1.0)
"""Cost caps, USD per problem, for 'best validation accuracy at a cap'."""
VOTE_STEPS = frozenset({"majority_vote", "vote_arithmetic_checked"})


# --- (a) overhead --------------------------------------------------------------------------


def _noop(name: str) -> Any:
    def step(x: Any) -> Any:
        record_model_latency(0.0)
        return f"{x}{name}"

    step.__name__ = name
    return step


def _score(output: Any, example: GoldExample) -> float:
    return 1.0 if str(example.expected) in str(output) else 0.0


async def _overhead(n_candidates: int) -> tuple[float, int]:
    callables = CallableRegistry()
    for name in ("a", "b", "c", "d"):
        callables.register(name, _noop(name), f"appends {name}")
    agents = AgentRegistry()
    seed = parse_topology(
        {
            "kind": "pipeline",
            "steps": [{"operation": {"kind": "function_step", "callable_name": "a"}}],
        }
    )
    gene = TopologyGene(name="noop", initial=seed, max_depth=4)
    evaluator = TopologyEvaluator(
        callable_registry=callables,
        agent_registry=agents,
        score_fn=_score,
        cache=InMemoryEvaluationCache(),
        max_depth=4,
    )
    examples = [GoldExample(input=str(i), expected="b", id=f"x{i}") for i in range(4)]
    strategy = EvolutionarySearch(
        EvolutionaryConfig(n_generations=None, population_size=10, minibatch_size=4, seed=1)
    )
    run = SearchRun(
        strategy,
        gene=gene,
        evaluator=evaluator,
        validation=examples,
        callable_registry=callables,
        agent_registry=agents,
        budget=Budget(max_evaluations=n_candidates),
        handle_sigint=False,
    )
    start = time.perf_counter()
    result = await run.run()
    elapsed = time.perf_counter() - start
    evaluated = sum(1 for r in result.history if r.status == "evaluated")
    return elapsed, evaluated


# --- (b) acceptance --------------------------------------------------------------------------


@dataclass
class TestFigures:
    """The held-out test of one run's validation front (`--test-front`)."""

    gap: float | None  # mean validation - test accuracy over the scored front
    n_test: int  # test problems
    gate: tuple[int, float, float] | None  # best hand-built gate: (idx, test acc, test $)
    beat: tuple[int, float, float, float, float] | None  # best at <= the gate's test cost:
    # (idx, test acc, test $, paired interval low, high of acc - gate's, on test)


@dataclass
class RunFigures:
    """What one search run measured."""

    strategy: str
    seed: int
    points: list[tuple[float, float]]  # (accuracy, USD per problem) on the full validation split
    specs: list[AnyNode]  # the same candidates' specs
    evaluations: int
    requests: int
    hit_rate: float | None
    wall_s: float
    rescore_s: float
    single_agent_costs: list[float] = field(default_factory=list[float])
    test: TestFigures | None = None

    def front(self) -> list[tuple[float, float]]:
        if not self.points:
            return []
        mask = pareto_front_mask(self.points, ["max", "min"])
        return sorted({p for p, m in zip(self.points, mask, strict=True) if m})

    def hv(self, ref_cost: float) -> float:
        return hypervolume(self.points, [0.0, ref_cost], ["max", "min"]) if self.points else 0.0

    def best_at(self, cap: float) -> float | None:
        ok = [a for a, c in self.points if c <= cap]
        return max(ok) if ok else None


def _hit_rate(run: SearchRun) -> float | None:
    """The call-level cache's hit rate, if the evaluator exposes counters (`hits`/`misses` on
    a `call_cache` or `call_cache_stats()`); None otherwise."""
    ev: Any = run.evaluator
    stats: Any = None
    if callable(getattr(ev, "call_cache_stats", None)):
        stats = ev.call_cache_stats()
    elif getattr(ev, "call_cache", None) is not None:
        stats = ev.call_cache
    if stats is None:
        return None
    get = stats.get if isinstance(stats, dict) else lambda k: getattr(stats, k, None)
    hits, misses, other = get("hits"), get("misses"), get("uncacheable") or 0
    if not isinstance(hits, int | float) or not isinstance(misses, int | float):
        return None
    total = hits + misses + other
    return hits / total if total else None


def _rescore_seconds(events: Sequence[SearchEvent]) -> float:
    """From the last `ArchiveSnapshot` before the 're-scored N candidate(s)' (or 'stopped
    during the re-scoring') log line to that line; 0 when nothing was re-scored."""
    last_snapshot: float | None = None
    for ev in events:
        if isinstance(ev, ArchiveSnapshot):
            last_snapshot = ev.ts
        elif isinstance(ev, LogMessage) and (
            ev.message.startswith("re-scored ")
            or ev.message.startswith("stopped during the re-scoring")
        ):
            return 0.0 if last_snapshot is None else max(0.0, ev.ts - last_snapshot)
    return 0.0


async def _one_run(
    problem: Problem,
    strategy: str | Strategy,
    seed: int,
    *,
    config: dict[str, Any] | None = None,
    budget: Budget | None = None,
    call_cache: InMemoryCallCache | None = None,
    test_front: bool = False,
) -> tuple[RunFigures, OptimizationResult]:
    events: list[SearchEvent] = []
    run = build_search(
        problem,
        strategy,
        seed=seed if isinstance(strategy, str) else None,  # an instance brings its own
        config=config,
        budget=budget,
        subscribers=[events.append],
        handle_sigint=False,
        use_test_split=test_front,
        # a fresh call cache per run, as `topology-studio search` has one (here in memory, so
        # no run profits from another's calls), unless the caller shares one (results are
        # identical, only the model calls saved differ)
        call_cache=call_cache if call_cache is not None else InMemoryCallCache(),
    )
    start = time.perf_counter()
    result = await run.run()
    wall = time.perf_counter() - start
    points: list[tuple[float, float]] = []
    specs: list[AnyNode] = []
    singles: list[float] = []
    for r in result.history:
        if r.status != "evaluated" or r.split != "validation" or not r.valid:
            continue
        if r.accuracy is None or r.cost_usd is None:
            continue
        points.append((r.accuracy, r.cost_usd))
        spec = parse_topology(r.spec_json)
        specs.append(spec)
        nodes = [n for _, n in walk(spec)]
        if len(nodes) == 2 and nodes[1].node_kind == "agent_step":
            singles.append(r.cost_usd)
    requests = sum(e.requests for e in events if isinstance(e, ExampleEvaluated))
    return (
        RunFigures(
            strategy=strategy if isinstance(strategy, str) else strategy.name,
            seed=seed,
            points=points,
            specs=specs,
            evaluations=int(result.raw["budget_used"]["evaluations"]),
            requests=requests,
            hit_rate=_hit_rate(run),
            wall_s=wall,
            rescore_s=_rescore_seconds(events),
            single_agent_costs=singles,
            test=_test_figures(result, events) if test_front else None,
        ),
        result,
    )


def _test_figures(result: OptimizationResult, events: Sequence[SearchEvent]) -> TestFigures:
    """The test front's figures: the mean validation - test gap, and the best test-front point
    that is not a hand-built gate at or below the test cost of the best hand-built agreement
    gate (the opening's `gate` candidate with the best test accuracy: the strongest baseline),
    with the paired bootstrap interval of its test accuracy minus the gate's (1,000 resamples,
    seed 0, 95%)."""
    per_example: dict[int, dict[str, float]] = {}
    for e in events:
        if isinstance(e, ExampleEvaluated) and e.split == "test":
            per_example.setdefault(e.candidate_idx, {})[e.example_id] = e.accuracy
    val = {
        r.candidate_idx: r
        for r in result.history
        if r.status == "evaluated" and r.split == "validation" and r.valid
    }
    scored = [t for t in result.raw.get("test_front") or [] if t["valid"] and t["n_examples"]]
    gaps = [
        float(acc) - t["accuracy"]
        for t in scored
        if t["candidate_idx"] in val and (acc := val[t["candidate_idx"]].accuracy) is not None
    ]
    gates = [
        t
        for t in scored
        if val.get(t["candidate_idx"]) and "gate" in val[t["candidate_idx"]].operator
    ]
    gate_t = max(gates, key=lambda t: (t["accuracy"], -t["cost_usd"]), default=None)
    gate = (
        None
        if gate_t is None
        else (gate_t["candidate_idx"], gate_t["accuracy"], gate_t["cost_usd"])
    )
    beat = None
    if gate_t is not None:
        cheaper = [t for t in scored if t["cost_usd"] <= gate_t["cost_usd"] and t not in gates]
        best = max(cheaper, key=lambda t: t["accuracy"], default=None)
        if best is not None:
            a, g = per_example[best["candidate_idx"]], per_example[gate_t["candidate_idx"]]
            ids = sorted(set(a) & set(g))
            iv = paired_bootstrap([a[i] for i in ids], [g[i] for i in ids], seed=0)
            beat = (best["candidate_idx"], best["accuracy"], best["cost_usd"], iv.low, iv.high)
    return TestFigures(
        gap=statistics.mean(gaps) if gaps else None,
        n_test=max((t["n_examples"] for t in scored), default=0),
        gate=gate,
        beat=beat,
    )


def _test_line(t: TestFigures) -> str:
    """One run's test-front line (accuracies in points)."""
    gap = "n/a" if t.gap is None else f"{t.gap * 100:+.2f}"
    text = f"test front on {t.n_test} problems: mean validation - test gap {gap} points"
    if t.gate is not None:
        text += f"; best gate {t.gate[0]}: {t.gate[1]:.4f} at ${t.gate[2]:.3f}"
    if t.beat is not None and t.gate is not None:
        idx, acc, cost, low, high = t.beat
        text += (
            f"; best at <= its cost: {idx}, {acc:.4f} at ${cost:.3f} "
            f"(vs gate {(acc - t.gate[1]) * 100:+.2f} points, paired 95% "
            f"[{low * 100:+.2f}, {high * 100:+.2f}])"
        )
    return text


def _structure(spec: AnyNode) -> set[str]:
    """'cascade' (a router with an identity accept route or fallback) and/or 'vote'."""
    found: set[str] = set()
    for _, node in walk(spec):
        if isinstance(node, RouterSpec):
            parts = [r.step for r in node.routes]
            if node.fallback_step is not None:
                parts.append(node.fallback_step)
            if any(
                isinstance(p, FunctionStepSpec) and p.callable_name == "keep_answer" for p in parts
            ):
                found.add("cascade")
        elif isinstance(node, ParallelSpec) and node.merge == "merge_vote":
            found.add("vote")
        elif isinstance(node, FunctionStepSpec) and node.callable_name in VOTE_STEPS:
            found.add("vote")
    return found


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


async def _acceptance(args: argparse.Namespace) -> None:
    try:
        problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
    except (DatasetError, ProblemError) as exc:
        print(f"(b) gsm8k_replay: skipped ({str(exc).splitlines()[0]})")
        return
    print(
        f"(b) gsm8k_replay, default budget {problem.search.max_evaluations} evaluations; "
        f"exhaustive bound N = {args.max_nodes} nodes, grammar BENCH_GRAMMAR"
    )
    figures: dict[str, list[RunFigures]] = {}
    ref_cost: float
    if not args.skip_exhaustive:
        cfg = {"max_nodes": args.max_nodes, **BENCH_GRAMMAR}
        probe = build_search(problem, "exhaustive", config=cfg)
        probe.strategy.preflight(probe.space)
        enum = getattr(probe.strategy, "enumeration", None)
        assert enum is not None
        print(f"    {enum.summary()}")
        ex, _ = await _one_run(
            problem,
            "exhaustive",
            0,
            config=cfg,
            budget=Budget(max_evaluations=enum.count + 1),
        )
        figures["exhaustive"] = [ex]
        ref_cost = 1.1 * max(ex.single_agent_costs)
        ex_hv = ex.hv(ref_cost)
    else:
        ref_cost, ex_hv = args.ref_cost, args.exhaustive_hv
    print(f"    reference point: accuracy 0, cost ${ref_cost:.4f} per problem")
    for strategy in args.strategies:
        for seed in args.seeds:
            config = (
                {"bridge_order": args.bridge_order}
                if args.bridge_order and strategy == "evolutionary"
                else None
            )
            fig, _ = await _one_run(
                problem, strategy, seed, config=config, test_front=args.test_front
            )
            figures.setdefault(strategy, []).append(fig)
            print(
                f"    {strategy} seed {seed}: hv ratio {fig.hv(ref_cost) / ex_hv:.4f}, "
                f"{fig.evaluations} evaluations, {fig.wall_s:.1f} s",
                flush=True,
            )
            if fig.test is not None:
                print(f"      {_test_line(fig.test)}", flush=True)
    print()
    header = (
        f"{'strategy':<13}{'runs':>5}{'hv/exh mean':>12}{'min..max':>16}{'stdev':>8}"
        + "".join(f"{'acc@$' + format(c, 'g'):>10}" for c in CAPS_USD)
        + f"{'evals':>7}{'requests':>11}{'hit rate':>9}{'wall s':>8}{'rescore':>9}"
    )
    print(header)
    summary: dict[str, dict[str, float]] = {}
    for strategy, runs in figures.items():
        ratios = [r.hv(ref_cost) / ex_hv for r in runs]
        sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        caps = [
            statistics.mean(b)
            if (b := [x for r in runs if (x := r.best_at(c)) is not None])
            else None
            for c in CAPS_USD
        ]
        walls = [r.wall_s for r in runs]
        share = [r.rescore_s / r.wall_s for r in runs if r.wall_s > 0]
        rates = [r.hit_rate for r in runs if r.hit_rate is not None]
        summary[strategy] = {
            "mean": statistics.mean(ratios),
            "min": min(ratios),
            "max": max(ratios),
            "spread": max(ratios) - min(ratios),
            "stdev": sd,
            "max_wall": max(walls),
            "max_share": max(share) if share else 0.0,
        }
        print(
            f"{strategy:<13}{len(runs):>5}{statistics.mean(ratios):>12.4f}"
            f"{f'{min(ratios):.4f}..{max(ratios):.4f}':>16}{sd:>8.4f}"
            + "".join(f"{_fmt(c):>10}" for c in caps)
            + f"{statistics.mean(r.evaluations for r in runs):>7.1f}"
            f"{statistics.mean(r.requests for r in runs):>11.0f}"
            f"{_fmt(statistics.mean(rates) if rates else None):>9}"
            f"{statistics.mean(walls):>8.1f}"
            f"{_fmt(statistics.mean(share) * 100 if share else None, '.1f') + '%':>9}"
        )
    ex_front = figures["exhaustive"][0].front() if "exhaustive" in figures else []
    if ex_front:
        print(
            "    exhaustive front (accuracy, $/problem): "
            + ", ".join(f"({a:.3f}, {c:.4f})" for a, c in ex_front)
        )

    demo, demo_result = await _one_run(
        problem,
        "evolutionary",
        1,
        config={"minibatch_size": 10},
        budget=Budget(
            max_evaluations=10,
            max_usd=problem.search.max_usd,
            max_wall_s=problem.search.max_wall_time_s,
        ),
    )
    front_specs = [parse_topology(c[problem.name]) for c in demo_result.pareto_candidates]
    found = set().union(*(_structure(s) for s in front_specs)) if front_specs else set()
    print(
        f"    demo short search: {demo.evaluations} evaluations, {demo.wall_s:.1f} s, front of "
        f"{len(front_specs)}: {', '.join(sorted(found)) or 'no cascade, no vote'}"
    )

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    print()
    evo, rnd = summary.get("evolutionary"), summary.get("random")
    if evo is not None:
        print(
            f"{verdict(evo['min'] >= 0.99)}  evolutionary >= 0.99 of the exhaustive hv on every seed (min {evo['min']:.4f})"
        )
    if evo is not None and rnd is not None:
        gap = evo["mean"] - rnd["mean"]
        print(
            f"{verdict(gap > rnd['spread'])}  evolutionary mean above random's by more than "
            f"random's spread, max - min ({evo['mean']:.4f} - {rnd['mean']:.4f} = {gap:.4f} "
            f"vs {rnd['spread']:.4f})"
        )
        print(
            f"{verdict(gap > rnd['stdev'])}  ... and by more than random's stdev "
            f"({gap:.4f} vs {rnd['stdev']:.4f})"
        )
    searched = [s for k, s in summary.items() if k != "exhaustive"]
    if searched:
        share = max(s["max_share"] for s in searched)
        print(
            f"{verdict(share <= 0.20)}  re-scoring <= 20% of wall time (worst {share * 100:.1f}%)"
        )
    default = summary.get(problem.search.strategy)
    if default is not None:
        wall = default["max_wall"]
        print(
            f"{verdict(wall <= 60.0)}  default search ({problem.search.strategy}, default "
            f"budget, no held-out test) <= 60 s (slowest seed {wall:.1f} s)"
        )
    print(f"{verdict(bool(found))}  the demo's short search finds a cascade or a vote on its front")


# --- (c) the default offline search ---------------------------------------------------------

BASELINE = Path(__file__).with_name("baselines") / "gsm8k_replay_default.json"
"""Results of `topology-studio search gsm8k_replay` (seed 42): what every later version must
reproduce exactly. First recorded before the performance work (virtual clock, fast IR path,
router dispatch; commit 50d0018), which all reproduced it; recorded again on 2026-12-02 when the
replay problem gained five input-only conditions (a new registry is a new search, so its results
are new), with the code of commit ff4c7bc plus that registry; and on 2026-12-07, when the
opening's proposals were regrouped (cascades and input-feature routers share one turn) and the
mutations were told each agent's per-example scores: the first 35 candidates, the validation
front's hypervolume and the winner are unchanged, the later mutations differ."""

_ARCHIVE_FIELDS = (
    "candidate_idx",
    "parent_idx",
    "operator",
    "candidate_status",
    "spec_hash",
    "n_examples",
    "accuracy",
    "cost_usd",
    "latency_ms",
    "aggregate_score",
    "error_rate",
    "same_as",
    "on_front",
    "is_best",
    "test_accuracy",
)
_EXAMPLE_FIELDS = ("c", "x", "a", "u", "l", "i", "o", "r", "er")
"""A journalled per-example record's keys but `e` (sequence), `t` (timestamp) and `os` (the
output summary: presentation, not a result; the studio's drill-down put the answer first in it)."""


def fingerprint(db: Path, run_id: str) -> dict[str, Any]:
    """A run's results without its timings: the archive (`show --json`, `_ARCHIVE_FIELDS`), the
    test front, the best candidate, and the sha256 of its sorted per-example records."""
    out = subprocess.run(
        [sys.executable, "-m", "studio.cli", "show", run_id, "--db", str(db), "--json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    shown = json.loads(out)
    rows: list[str] = []
    journal = Path(str(db) + ".journals") / f"{run_id}.jsonl"
    with journal.open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if "type" in rec:
                continue
            rows.append(json.dumps([rec.get(k) for k in _EXAMPLE_FIELDS]))
    rows.sort()
    return {
        "archive": [{k: r.get(k) for k in _ARCHIVE_FIELDS} for r in shown["archive"]],
        "test_front": shown["test_front"],
        "best": shown["best"]["candidate_idx"] if shown.get("best") else None,
        "n_example_records": len(rows),
        "example_records_sha256": hashlib.sha256("\n".join(rows).encode()).hexdigest(),
    }


def _differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    diffs: list[str] = []
    for key in a.keys() | b.keys():
        if a.get(key) == b.get(key):
            continue
        if isinstance(a.get(key), list) and isinstance(b.get(key), list):
            la, lb = a[key], b[key]
            n = next(
                (i for i, (x, y) in enumerate(zip(la, lb, strict=False)) if x != y),
                min(len(la), len(lb)),
            )
            diffs.append(f"{key} (first at row {n})")
        else:
            diffs.append(f"{key} ({a.get(key)!r} vs {b.get(key)!r})")
    return sorted(diffs)


@dataclass
class ChildRun:
    run_id: str
    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    peak_tree_pss_mib: float


_LAUNCHER = """
import json, os, resource, subprocess, sys, time
def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo.extend(int(c) for c in fh.read().split())
        except OSError:
            pass
    return out
def pss_kib(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0
start = time.perf_counter()
child = subprocess.Popen(sys.argv[2:])
peak_pss = 0
while child.poll() is None:
    peak_pss = max(peak_pss, sum(pss_kib(p) for p in tree(child.pid)))
    time.sleep(0.05)
code = child.returncode
wall = time.perf_counter() - start
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
figures = {"code": code, "wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss, "pss": peak_pss}
os.write(int(sys.argv[1]), json.dumps(figures).encode())
"""
"""Runs the CLI as its own child and reports that child's figures. Peak RSS is the largest
resident set a process ever had, and a forked child starts with its parent's: the CLI forked
straight from this process (hundreds of MiB after part (b)) would report this process's
memory. The launcher is a fresh interpreter (about 10 MiB), so its child's peak is the CLI's.
The CLI forks evaluation workers (`[search] workers`) that share its pages
copy-on-write: `ru_maxrss` is the largest of these processes, each counting the shared pages in
full, so the launcher also samples, every 50 ms, the sum of the proportional set sizes (`Pss`
of `/proc/PID/smaps_rollup`: a page shared by two processes counts half in each) of the CLI and
every process under it: the memory the whole run holds at once."""


def _run_cli(args: list[str]) -> ChildRun:
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-c", _LAUNCHER, str(write_fd), sys.executable, "-m", "studio.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    assert child.stdout is not None
    output = child.stdout.read()
    child.wait()
    with os.fdopen(read_fd, "rb") as pipe:
        figures = json.loads(pipe.read() or b"{}")
    if child.returncode != 0 or figures.get("code") != 0:
        code = figures.get("code", child.returncode)
        raise SystemExit(f"topology-studio {' '.join(args)} failed ({code}):\n{output}")
    found = re.search(r"^== Run (\S+) ==", output, re.MULTILINE)
    if found is None:
        raise SystemExit(f"no run id in the output of topology-studio {' '.join(args)}")
    return ChildRun(
        found.group(1),
        figures["wall"],
        figures["cpu"],
        figures["rss"] / 1024,
        figures.get("pss", 0) / 1024,
    )


def _default_search(write_baseline: list[str] | None) -> None:
    if write_baseline:
        db, run_id = Path(write_baseline[0]), write_baseline[1]
        BASELINE.parent.mkdir(exist_ok=True)
        BASELINE.write_text(json.dumps(fingerprint(db, run_id), indent=1) + "\n")
        print(f"(c) baseline written: {BASELINE} (run {run_id} of {db})")
        return
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else None
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.duckdb"
        print("(c) default offline search: topology-studio search gsm8k_replay (fresh database)")
        prints: dict[str, dict[str, Any]] = {}
        runs: dict[str, ChildRun] = {}
        for label in ("cold", "warm"):
            run = _run_cli(["search", "gsm8k_replay", "--db", str(db)])
            runs[label] = run
            prints[label] = fingerprint(db, run.run_id)
            same = (
                "no baseline"
                if baseline is None
                else "identical to the baseline"
                if prints[label] == baseline
                else "DIFFERS from the baseline: "
                + ", ".join(_differences(baseline, prints[label]))
            )
            print(
                f"    {label:<5} wall {run.wall_s:6.1f} s, CPU {run.cpu_s:6.1f} s, peak RSS "
                f"{run.peak_rss_mib:6.0f} MiB (largest process), peak PSS of the process tree "
                f"{run.peak_tree_pss_mib:6.0f} MiB; results {same}",
                flush=True,
            )
    warm = runs["warm"]
    ok_same = baseline is not None and all(p == baseline for p in prints.values())
    print(
        f"{'PASS' if warm.wall_s <= 10.0 else 'FAIL'}  default search, warm call cache, <= 10 s "
        f"wall ({warm.wall_s:.1f} s; cold {runs['cold'].wall_s:.1f} s)"
    )
    rss = max(r.peak_rss_mib for r in runs.values())
    pss = max(r.peak_tree_pss_mib for r in runs.values())
    print(
        f"{'PASS' if max(rss, pss) <= 300 else 'FAIL'}  peak memory <= 300 MiB (largest "
        f"process's RSS {rss:.0f} MiB; the whole process tree's PSS {pss:.0f} MiB)"
    )
    print(
        f"{'PASS' if ok_same else 'FAIL'}  fronts, winner and recorded latencies identical to "
        "the baseline, cold and warm"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description="Search benchmarks: engine overhead and the structure-search acceptance."
    )
    parser.add_argument("--candidates", type=int, default=200, help="(a): candidates")
    parser.add_argument("--skip-gsm8k", action="store_true", help="only (a), the fast part")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--strategies", nargs="+", default=["evolutionary", "random"])
    parser.add_argument("--max-nodes", type=int, default=7, help="the exhaustive node bound")
    parser.add_argument("--skip-exhaustive", action="store_true", help="use --exhaustive-hv")
    parser.add_argument("--exhaustive-hv", type=float, default=1.0)
    parser.add_argument("--ref-cost", type=float, default=1.0)
    parser.add_argument("--default-search-only", action="store_true", help="only (c)")
    parser.add_argument(
        "--bridge-order",
        nargs="+",
        choices=["mix", "learned", "cascade"],
        help="(b): the evolutionary runs' EvolutionaryConfig.bridge_order (default: its own)",
    )
    parser.add_argument(
        "--test-front",
        action="store_true",
        help="(b): score each run's validation front on the held-out test split and print the "
        "mean validation - test gap and the best point against the best hand-built gate",
    )
    parser.add_argument(
        "--write-baseline", nargs=2, metavar=("DB", "RUN"), help="(c): record RUN as BASELINE"
    )
    args = parser.parse_args()
    if args.default_search_only or args.write_baseline:
        _default_search(args.write_baseline)
        return
    elapsed, evaluated = asyncio.run(_overhead(args.candidates))
    print(
        f"(a) engine overhead: {evaluated} candidates in {elapsed:.2f} s = "
        f"{1000 * elapsed / max(1, evaluated):.2f} ms per candidate (4 no-op examples each)"
    )
    if not args.skip_gsm8k:
        asyncio.run(_acceptance(args))
        _default_search(None)


if __name__ == "__main__":
    main()
