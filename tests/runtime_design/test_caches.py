"""Topology caches: goal normalisation, NoCache, InMemoryLRU eviction order and counters."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import TypeAdapter

from core.ir.models import TopologySpec
from core.runtime_design import (
    DECAY_FACTOR,
    CacheHit,
    CacheStats,
    InMemoryLRU,
    NoCache,
    TopologyCache,
    normalise_goal,
)

SPEC_A = TypeAdapter(TopologySpec).validate_python(
    {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "a"}}]}
)
SPEC_B = TypeAdapter(TopologySpec).validate_python(
    {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "b"}}]}
)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_normalise_goal_casefolds_and_collapses_whitespace() -> None:
    assert normalise_goal("  What IS\t2 +\n\n 2?  ") == "what is 2 + 2?"
    assert normalise_goal("STRASSE Straße") == "strasse strasse"
    with pytest.raises(ValueError, match="empty"):
        normalise_goal(" \n ")
    with pytest.raises(TypeError, match="must be a string, got int"):
        normalise_goal(3)  # type: ignore[arg-type]


def test_every_cache_is_a_topology_cache() -> None:
    assert isinstance(NoCache(), TopologyCache)
    assert isinstance(InMemoryLRU(2), TopologyCache)


def test_no_cache_never_hits_and_counts() -> None:
    cache = NoCache()
    run(cache.store("q", SPEC_A, True))
    assert run(cache.lookup_hit("q")) is None
    run(cache.store("q", SPEC_A, False))
    assert cache.stats == CacheStats(hits=0, misses=1, stores=1, decays=0)


def test_lru_hit_is_exact_on_the_normalised_goal() -> None:
    cache = InMemoryLRU(4)
    run(cache.store("Weather  today", SPEC_A, True))
    assert run(cache.lookup_hit("weather today")) == CacheHit(
        spec=SPEC_A, similarity=1.0, reliability=1.0, key="weather today"
    )
    assert run(cache.lookup_hit("weather tomorrow")) is None
    assert cache.stats == CacheStats(hits=1, misses=1, stores=1, decays=0)
    assert cache.stats.hit_rate == 0.5


def test_lru_evicts_the_least_recently_used_goal() -> None:
    cache = InMemoryLRU(3)
    for goal in ("a", "b", "c"):
        run(cache.store(goal, SPEC_A, True))
    assert cache.keys() == ["a", "b", "c"]
    assert run(cache.lookup_hit("a")) is not None  # a becomes the most recent
    assert cache.keys() == ["b", "c", "a"]
    run(cache.store("d", SPEC_B, True))  # evicts b
    assert cache.keys() == ["c", "a", "d"]
    run(cache.store("c", SPEC_B, True))  # refresh moves c to the end, nothing evicted
    assert cache.keys() == ["a", "d", "c"]
    run(cache.store("e", SPEC_A, True))  # evicts a
    assert cache.keys() == ["d", "c", "e"]
    assert run(cache.lookup_hit("a")) is None
    assert run(cache.lookup_hit("b")) is None
    hit = run(cache.lookup_hit("c"))
    assert hit is not None and hit.spec == SPEC_B
    assert cache.keys() == ["d", "e", "c"]
    assert cache.stats == CacheStats(hits=2, misses=2, stores=6, decays=0)


def test_lru_failure_decays_until_the_entry_stops_surfacing() -> None:
    cache = InMemoryLRU(2, min_reliability=0.3)
    run(cache.store("q", SPEC_A, True))
    expected = [0.7, 0.7 * 0.7, 0.7 * 0.7 * 0.7]
    for value in expected:
        run(cache.store("Q", SPEC_A, False))
        assert cache.reliability("q") == pytest.approx(value, rel=1e-12)
        hit = run(cache.lookup_hit("q"))
        assert hit is not None and hit.reliability == pytest.approx(value, rel=1e-12)
    run(cache.store("q", SPEC_A, False))
    assert cache.reliability("q") == pytest.approx(0.2401, rel=1e-12)
    assert run(cache.lookup_hit("q")) is None
    # a failure for a goal it does not hold changes nothing
    run(cache.store("other", SPEC_A, False))
    assert cache.keys() == ["q"]
    assert cache.stats == CacheStats(hits=3, misses=1, stores=1, decays=4)
    # a success moves it up one step of the moving average: 0.2401 * 0.7 + 0.3
    run(cache.store("q", SPEC_A, True))
    assert cache.reliability("q") == pytest.approx(0.2401 * DECAY_FACTOR + 0.3, rel=1e-12)
    assert run(cache.lookup_hit("q")) is not None


def test_bad_arguments_are_refused_with_their_name() -> None:
    with pytest.raises(ValueError, match="maxsize must be an integer >= 1, got 0"):
        InMemoryLRU(0)
    with pytest.raises(ValueError, match=r"min_reliability must be in \[0, 1\], got 1.5"):
        InMemoryLRU(2, min_reliability=1.5)
    with pytest.raises(ValueError, match="spec is not a valid TopologySpec"):
        run(InMemoryLRU(2).store("q", {"kind": "nope"}, True))


def test_lookup_returns_the_spec_and_lookup_hit_its_details() -> None:
    cache = InMemoryLRU(4)
    run(cache.store("Weather today", SPEC_A, True))
    assert run(cache.lookup("weather  TODAY")) == SPEC_A  # the guide's form: the prior spec
    assert run(cache.lookup("weather tomorrow")) is None
    assert run(cache.lookup_hit("weather today")) == CacheHit(
        spec=SPEC_A, similarity=1.0, reliability=1.0, key="weather today"
    )
    assert cache.stats == CacheStats(hits=2, misses=1, stores=1, decays=0)  # each counted once
    none = NoCache()
    assert (run(none.lookup("q")), run(none.lookup_hit("q"))) == (None, None)
    assert none.stats == CacheStats(misses=2)
