"""How far learned routers can go on a problem: the ceiling of "route to the cheaper front
neighbour when a classifier fitted on train says it is right", measured outside the search.

What it does, on any loaded problem with a train split (`[gold] train_size`):

1. The hand-built candidates: every structure of the search's opening
   (`core.search.operators.opening_specs`: single agents, agreement gates, votes, cascades,
   input-feature routers), with the agents' costs measured first, each evaluated on the train,
   validation and test splits (the problem's evaluator, time scale 0).
2. The hand-built validation front (accuracy up, cost down). For each pair of cost-neighbours
   on it, and for each model (`LEARNED_MODELS`: logistic on the text features, logistic and
   15-NN on the hashed embedding), fit "the cheaper one is right" on train
   (`core.combinators.learned.fit_learned_condition`) and report the AUC of its probability on
   validation and on test (0.5: no better than chance; how well train predicts which one is
   right), then the routers `router(learned: cheaper, else dearer)` at the thresholds that
   send 20%..80% of train to the cheaper one. An input-only condition calls nothing, and each
   route runs exactly as the candidate alone, so a router's per-example result is the chosen
   neighbour's recorded one: its figures are exact, not modelled.
3. Selection as the acceptance asks: the validation front of hand-built and learned candidates
   together; each of its points scored on test; the best hand-built agreement gate on test
   (operator `opening:gate`); the best other test point at or below that gate's test cost, and
   the cheapest one at or above the gate's test accuracy, each with the paired bootstrap
   interval of its test accuracy minus the gate's (1,000 resamples, seed 0, 95%); the mean
   validation - test gap over the front.

Usage: `python bench/bench_learned.py [--problem gsm8k_replay]`. Needs
`TOPOLOGY_STUDIO_DATASETS` (or the dataset cache) for the replay problem.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from dataclasses import dataclass

import numpy as np

from core.agents.call_cache import InMemoryCallCache
from core.combinators.ballot import input_text
from core.combinators.learned import (
    FeatureSet,
    LearnedKind,
    featurize,
    fit_learned_condition,
    thresholds_for_shares,
)
from core.evaluation.evaluator import TopologyEvaluator
from core.ir import TopologySpec
from core.ir.models import AgentStepSpec, PipelineSpec, PipelineStepEntry
from core.problems import load_problem
from core.search.engine import build_search
from core.search.noise import paired_bootstrap
from core.search.operators import MutationContext, opening_specs
from core.search.pareto import pareto_front_mask

LEARNED_MODELS: tuple[tuple[LearnedKind, FeatureSet, int], ...] = (
    ("logistic", "text", 0),
    ("logistic", "hashed", 64),
    ("knn", "hashed", 64),
)
"""(model, features, hashed dimension) of the fitted conditions."""
SHARES = (0.2, 0.35, 0.5, 0.65, 0.8)
"""Shares of train sent to the cheaper neighbour: the thresholds of one fit."""
SPLITS = ("train", "validation", "test")


@dataclass
class Cand:
    """A candidate's per-example accuracy and cost on each split (example id -> value)."""

    name: str
    operator: str
    acc: dict[str, dict[str, float]]
    cost: dict[str, dict[str, float]]

    def mean(self, split: str, what: str = "acc") -> float:
        values = (self.acc if what == "acc" else self.cost)[split]
        return statistics.fmean(values.values())


def auc(labels: list[int], scores: list[float]) -> float:
    """The area under the ROC curve (ties count half); 0.5 when one label is missing."""
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return 0.5
    p, n = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((p > n).sum() + 0.5 * (p == n).sum()) / (len(pos) * len(neg)))


async def _candidates(problem_name: str) -> tuple[list[Cand], dict[str, dict[str, str]]]:
    problem = load_problem(problem_name, overrides={"models.time_scale": 0})
    if "train" not in problem.splits:
        raise SystemExit(f"{problem_name} has no train split ([gold] train_size)")
    run = build_search(problem, "evolutionary", call_cache=InMemoryCallCache())
    evaluator: TopologyEvaluator = run.evaluator
    texts = {s: {e.id or "": input_text(e.input) for e in problem.splits[s]} for s in SPLITS}
    ctx = MutationContext.from_space(run.space)
    costs: dict[str, float] = {}
    for name in ctx.agent_names:
        single = PipelineSpec(steps=[PipelineStepEntry(operation=AgentStepSpec(agent_name=name))])
        ev = await evaluator.evaluate(single, problem.splits["validation"])
        costs[name] = ev.cost_usd
    specs: list[tuple[TopologySpec, str]] = opening_specs(
        ctx.model_copy(update={"agent_costs": costs})
    )
    out: list[Cand] = []
    for i, (spec, op) in enumerate(specs):
        acc: dict[str, dict[str, float]] = {}
        cost: dict[str, dict[str, float]] = {}
        for split in SPLITS:
            ev = await evaluator.evaluate(spec, problem.splits[split], split=split)
            acc[split] = {r.example_id: r.accuracy for r in ev.results}
            cost[split] = {r.example_id: r.cost_usd for r in ev.results}
        out.append(Cand(f"{op}#{i}", op, acc, cost))
    evaluator.close_workers()
    return out, texts


def _routed(cheap: Cand, dear: Cand, route: dict[str, dict[str, bool]], name: str) -> Cand:
    acc: dict[str, dict[str, float]] = {}
    cost: dict[str, dict[str, float]] = {}
    for split in SPLITS:
        pick = route[split]
        acc[split] = {i: (cheap if pick[i] else dear).acc[split][i] for i in pick}
        cost[split] = {i: (cheap if pick[i] else dear).cost[split][i] for i in pick}
    return Cand(name, "learned", acc, cost)


def _front(cands: list[Cand], split: str) -> list[Cand]:
    points = [(c.mean(split), c.mean(split, "cost")) for c in cands]
    mask = pareto_front_mask(points, ["max", "min"])
    return sorted(
        (c for c, m in zip(cands, mask, strict=True) if m), key=lambda c: c.mean(split, "cost")
    )


def _vs(a: Cand, gate: Cand) -> str:
    ids = sorted(gate.acc["test"])
    iv = paired_bootstrap(
        [a.acc["test"][i] for i in ids], [gate.acc["test"][i] for i in ids], seed=0
    )
    return (
        f"{a.name}: {a.mean('test'):.4f} at ${a.mean('test', 'cost'):.3f} (vs gate "
        f"{(a.mean('test') - gate.mean('test')) * 100:+.2f} points, paired 95% "
        f"[{iv.low * 100:+.2f}, {iv.high * 100:+.2f}]; cost {a.mean('test', 'cost') / gate.mean('test', 'cost') - 1:+.1%})"
    )


async def main(problem_name: str) -> None:
    hand, texts = await _candidates(problem_name)
    print(
        f"{problem_name}: {len(hand)} hand-built candidates (the opening), splits "
        + ", ".join(f"{s} {len(texts[s])}" for s in SPLITS)
    )
    front = _front(hand, "validation")
    learned: list[Cand] = []
    print("hand-built validation front neighbours, learned 'the cheaper one is right' (AUC):")
    for cheap, dear in zip(front, front[1:], strict=False):
        labels = {s: [1 if cheap.acc[s][i] >= 0.5 else 0 for i in sorted(texts[s])] for s in SPLITS}
        line = (
            f"  {cheap.name} ({cheap.mean('validation'):.3f}) -> {dear.name} "
            f"({dear.mean('validation'):.3f}); cheaper right on train {statistics.fmean(labels['train']):.3f}:"
        )
        for kind, feats, dim in LEARNED_MODELS:
            vec = {
                s: {i: featurize(t, feats, dim or 8) for i, t in texts[s].items()} for s in SPLITS
            }
            try:
                cond = fit_learned_condition(
                    vec["train"], cheap.acc["train"], dear.acc["train"],
                    cheaper=cheap.name, dearer=dear.name, kind=kind, feature_set=feats,
                )  # fmt: skip
            except ValueError as exc:
                line += f" {kind}/{feats} not fitted ({exc});"
                continue
            proba = {
                s: dict(
                    zip(
                        sorted(texts[s]),
                        cond.predict_proba([vec[s][i] for i in sorted(texts[s])]),
                        strict=True,
                    )
                )
                for s in SPLITS
            }
            aucs = [
                auc(labels[s], [proba[s][i] for i in sorted(texts[s])])
                for s in ("validation", "test")
            ]
            line += f" {kind}/{feats} val {aucs[0]:.3f} test {aucs[1]:.3f};"
            for t in thresholds_for_shares(list(proba["train"].values()), SHARES):
                route = {s: {i: p >= t for i, p in proba[s].items()} for s in SPLITS}
                learned.append(
                    _routed(
                        cheap,
                        dear,
                        route,
                        f"learned[{kind}/{feats} {cheap.name}|{dear.name} t={t:.3f}]",
                    )
                )
        oracle = statistics.fmean(
            max(cheap.acc["test"][i], dear.acc["test"][i]) for i in texts["test"]
        )
        print(line + f" a perfect router of the two: test {oracle:.3f}")
    chosen = _front(hand + learned, "validation")
    gaps = [(c.mean("validation") - c.mean("test")) * 100 for c in chosen]
    n_learned = sum(1 for c in chosen if c.operator == "learned")
    print(
        f"validation front of hand-built + {len(learned)} learned routers: {len(chosen)} points "
        f"({n_learned} learned); mean validation - test gap {statistics.fmean(gaps):+.2f} points"
    )
    on_front = [c for c in chosen if c.operator == "opening:gate"]
    for c in on_front:
        print(
            f"  agreement gate on that front: {c.name}: test {c.mean('test'):.4f} at ${c.mean('test', 'cost'):.3f}"
        )
    gates = [c for c in hand if c.operator == "opening:gate"]
    gate = max(gates, key=lambda c: (c.mean("test"), -c.mean("test", "cost")))
    print(
        f"best hand-built agreement gate on test (of all {len(gates)}, the strongest baseline): "
        f"{gate.name}: {gate.mean('test'):.4f} at ${gate.mean('test', 'cost'):.3f}"
    )
    others = [c for c in chosen if c is not gate]
    cheaper = [c for c in others if c.mean("test", "cost") <= gate.mean("test", "cost")]
    if cheaper:
        print(
            "  best front point at <= its cost: "
            + _vs(max(cheaper, key=lambda c: c.mean("test")), gate)
        )
    as_good = [c for c in others if c.mean("test") >= gate.mean("test")]
    if as_good:
        print(
            "  cheapest front point at >= its accuracy: "
            + _vs(min(as_good, key=lambda c: c.mean("test", "cost")), gate)
        )
    best_l = [c for c in learned if c.mean("test", "cost") <= gate.mean("test", "cost")]
    if best_l:
        print(
            "  (not chosen on validation) best learned router on test at <= its cost: "
            + _vs(max(best_l, key=lambda c: c.mean("test")), gate)
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The ceiling of learned routers on a problem.")
    parser.add_argument("--problem", default="gsm8k_replay")
    asyncio.run(main(parser.parse_args().problem))
