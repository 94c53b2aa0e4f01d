"""The evolutionary strategy's NSGA-II selection: the population is the valid archive entries by
non-dominated rank, then crowding distance (more isolated first), then archive order."""

from __future__ import annotations

import json
import math

from core.evaluation.metrics import MetricBundle
from core.ir import parse_topology
from core.search.archive import Archive, ArchiveEntry
from core.search.gene import TopologyGene
from core.search.strategies.base import AskContext, SearchSpace
from core.search.strategies.evolutionary import EvolutionaryConfig, EvolutionarySearch


def entry(name: str, accuracy: float, cost: float) -> ArchiveEntry:
    spec = {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "agent_step", "agent_name": name}}],
    }
    bundle = MetricBundle(accuracy=accuracy, cost_usd=cost)
    return ArchiveEntry(
        generation=0,
        spec_json=json.dumps(spec),
        bundles=[bundle],
        aggregate_score=accuracy if math.isfinite(accuracy) else math.nan,
    )


def context(archive: Archive) -> AskContext:
    seed = parse_topology(json.loads(archive[0].spec_json))
    gene = TopologyGene(name="g", initial=seed)
    return AskContext(
        generation=0,
        space=SearchSpace(gene=gene),
        seed_spec=seed,
        archive=archive,
        archive_candidates=tuple(range(len(archive))),
        history=(),
        next_candidate_idx=len(archive),
        check=lambda spec: None,  # type: ignore[arg-type,return-value]
    )


def test_population_is_rank_then_crowding_then_archive_order() -> None:
    archive = Archive(objectives=["accuracy", "cost_usd"])
    for e in (
        entry("a", 0.5, 0.5),  # front, crowding (0.6-0.1)/0.8 + (0.55-0.1)/0.8 = 1.1875
        entry("b", 0.9, 0.9),  # front, an extreme: infinite crowding
        entry("c", 0.1, 0.1),  # front, an extreme
        entry("d", 0.6, 0.55),  # front, crowding (0.9-0.5)/0.8 + (0.9-0.5)/0.8 = 1.0
        entry("e", 0.4, 0.6),  # dominated by a: rank 1, alone (infinite crowding)
        entry("f", math.nan, 0.0),  # invalid: never selected
    ):
        archive.add(e)
    strategy = EvolutionarySearch(
        EvolutionaryConfig(population_size=8, survival_objectives=("accuracy", "cost_usd"))
    )
    population = strategy.population(context(archive))
    assert [(i, r) for i, r, _ in population] == [(1, 0), (2, 0), (0, 0), (3, 0), (4, 1)]
    crowding = [d for _, _, d in population]
    assert crowding[:2] == [math.inf, math.inf] and crowding[4] == math.inf
    assert math.isclose(crowding[2], 1.1875, rel_tol=1e-12)
    assert math.isclose(crowding[3], 1.0, rel_tol=1e-12)
    small = EvolutionarySearch(
        EvolutionaryConfig(population_size=3, survival_objectives=("accuracy", "cost_usd"))
    ).population(context(archive))
    assert [i for i, _, _ in small] == [1, 2, 0]


def test_front_gaps_are_the_missing_rectangles_between_cost_neighbours_widest_first() -> None:
    """Front bridges aim at the widest gap: (accuracy gain) x (USD per example between)."""
    archive = Archive(objectives=["accuracy", "cost_usd"])
    for e in (
        entry("a", 0.25, 0.5),  # front
        entry("b", 0.5, 1.0),  # front
        entry("c", 1.0, 2.0),  # front
        entry("d", 0.2, 1.5),  # dominated: not a gap's end
        entry("e", 0.5, 1.0),  # b's twin: no gap between them
        entry("f", math.nan, 0.1),  # invalid: never an end
    ):
        archive.add(e)
    gaps = EvolutionarySearch.front_gaps(context(archive))
    assert gaps == [(1, 2, 0.5), (0, 1, 0.125)]  # (0.5 x 1.0), (0.25 x 0.5); b before e
