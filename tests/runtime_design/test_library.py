"""LibraryDesigner: the offline designer's rule (budget / latency limits, else the best measured
accuracy; the cheapest when nothing fits), the cache in front of it, and the TopologyOrchestrator
running its pick end to end with no model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import TypeAdapter
from pydantic_ai import Agent, models
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel

from core.ir.models import TopologySpec
from core.runtime_design import InMemoryLRU, LibraryEntry
from core.runtime_design.library import LibraryDesigner

models.ALLOW_MODEL_REQUESTS = False

ADAPTER: TypeAdapter[Any] = TypeAdapter(TopologySpec)


def spec_of(agent: str) -> Any:
    return ADAPTER.validate_python(
        {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": agent}}]}
    )


def make_agent() -> Any:
    return Agent(FunctionModel(lambda m, i: ModelResponse(parts=[TextPart("ok")])))


AGENTS = {"cheap": make_agent, "mid": make_agent, "strong": make_agent, "slow": make_agent}

# per request: accuracy, USD, ms
LIBRARY = [
    LibraryEntry(
        spec=spec_of("cheap"), accuracy=0.40, cost_usd=0.001, latency_ms=300.0, label="c0"
    ),
    LibraryEntry(spec=spec_of("mid"), accuracy=0.55, cost_usd=0.010, latency_ms=900.0, label="c3"),
    LibraryEntry(spec=spec_of("strong"), accuracy=0.70, cost_usd=0.500, latency_ms=2000.0),
    LibraryEntry(
        spec=spec_of("slow"), accuracy=0.70, cost_usd=0.500, latency_ms=8000.0, label="c9"
    ),
]


def designer(**kw: Any) -> LibraryDesigner:
    return LibraryDesigner(LIBRARY, {}, AGENTS, **kw)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.mark.parametrize(
    ("budget", "latency", "index", "reason"),
    [
        (
            None,
            None,
            2,  # 0.70 twice: the faster one
            "library entry 3: the best measured accuracy (accuracy 0.7000, $0.500000, 2000.0 ms)",
        ),
        (
            0.05,
            None,
            1,
            "library entry 2 (c3): the best accuracy within budget $0.050000 "
            "(accuracy 0.5500, $0.010000, 900.0 ms)",
        ),
        (
            0.010,
            None,
            1,  # a budget equal to the cost is within it
            "library entry 2 (c3): the best accuracy within budget $0.010000 "
            "(accuracy 0.5500, $0.010000, 900.0 ms)",
        ),
        (
            None,
            500.0,
            0,
            "library entry 1 (c0): the best accuracy within latency 500.0 ms "
            "(accuracy 0.4000, $0.001000, 300.0 ms)",
        ),
        (
            1.0,
            5000.0,
            2,
            "library entry 3: the best accuracy within budget $1.000000 and latency 5000.0 ms "
            "(accuracy 0.7000, $0.500000, 2000.0 ms)",
        ),
        (
            0.0001,
            None,
            0,
            "no library entry is within budget $0.000100: the cheapest, library entry 1 (c0) "
            "(accuracy 0.4000, $0.001000, 300.0 ms)",
        ),
        (
            0.05,
            100.0,
            0,
            "no library entry is within budget $0.050000 and latency 100.0 ms: the cheapest, "
            "library entry 1 (c0) (accuracy 0.4000, $0.001000, 300.0 ms)",
        ),
    ],
)
def test_the_rule(budget: float | None, latency: float | None, index: int, reason: str) -> None:
    d = designer()
    choice = d.choose(budget, latency)
    assert (choice.index, choice.reason) == (index, reason)
    assert choice.within == (not reason.startswith("no library entry"))
    result = run(d.design("What is 2+2?", budget_usd=budget, latency_ms=latency))
    assert (result.source, result.spec, result.thought) == ("designer", LIBRARY[index].spec, reason)
    assert (result.usage, result.cache_hit, result.rejected_hit) == ((), None, None)


def test_unmeasured_figures_rank_last_and_are_never_within_a_limit() -> None:
    bare = [spec_of("cheap"), LibraryEntry(spec=spec_of("mid"), accuracy=0.1, cost_usd=2.0)]
    d = LibraryDesigner(bare, {}, AGENTS)
    assert d.choose().index == 1
    assert d.choose(budget_usd=1.0).reason == (
        "no library entry is within budget $1.000000: the cheapest, library entry 2 "
        "(accuracy 0.1000, $2.000000, latency not measured)"
    )
    # a latency limit: entry 2's latency is not measured, so it is not within; nor is entry 1
    assert d.choose(latency_ms=10_000.0).index == 1


def test_the_designers_default_limits_apply_when_a_request_states_none() -> None:
    d = designer(budget_usd=0.05)
    assert run(d.design("q")).spec == LIBRARY[1].spec
    assert run(d.design("q", budget_usd=1.0)).spec == LIBRARY[2].spec


def test_the_cache_serves_a_goal_it_has_served_within_the_limits() -> None:
    cache = InMemoryLRU(10)
    d = designer(cache=cache)
    first = run(d.design("What is 2+2?"))
    run(cache.store("What is 2+2?", first.spec, True))
    again = run(d.design("  what is 2+2? "))  # the same normalised goal
    assert again.source == "cache"
    assert again.spec == LIBRARY[2].spec
    assert again.thought == (
        "cache hit: similarity 1.000 to 'what is 2+2?', reliability 1.000 (library entry 3)"
    )
    # a stated budget the cached entry exceeds: refused (not decayed), the rule picks
    cheap = run(d.design("What is 2+2?", budget_usd=0.05))
    assert (cheap.source, cheap.spec) == ("designer", LIBRARY[1].spec)
    assert cheap.rejected_hit is not None and cheap.rejected_hit.spec == LIBRARY[2].spec
    assert cache.reliability("What is 2+2?") == 1.0
    assert (cache.stats.hits, cache.stats.misses, cache.stats.decays) == (2, 1, 0)


def test_a_looser_limit_is_not_served_the_entry_a_tighter_request_cached() -> None:
    """Found by a newcomer: a question asked with a $0.05 budget cached the $0.010 entry, and the
    same question asked with no limit was then served it too (accuracy 0.55, not 0.70)."""
    cache = InMemoryLRU(10)
    d = designer(cache=cache)
    tight = run(d.design("q", budget_usd=0.05))
    assert (tight.source, tight.spec) == ("designer", LIBRARY[1].spec)
    run(cache.store("q", tight.spec, True))
    assert run(d.design("q", budget_usd=0.05)).source == "cache"  # the same limit: a hit
    loose = run(d.design("q"))
    assert (loose.source, loose.spec) == ("designer", LIBRARY[2].spec)
    assert loose.rejected_hit is not None and loose.rejected_hit.spec == LIBRARY[1].spec
    wide = run(d.design("q", budget_usd=1.0))
    assert (wide.source, wide.spec) == ("designer", LIBRARY[2].spec)
    assert cache.reliability("q") == 1.0  # refused, never decayed: nothing failed


def test_a_cached_spec_outside_the_library_is_used_only_without_limits() -> None:
    cache = InMemoryLRU(10)
    other = spec_of("slow")
    run(cache.store("q", spec_of("strong"), True))
    d = designer(cache=cache)
    assert run(d.design("q")).thought.endswith("(library entry 3)")
    d2 = LibraryDesigner(LIBRARY[:2], {}, AGENTS, cache=cache)
    run(cache.store("r", other, True))  # "slow" is registered but not in d2's library
    hit = run(d2.design("r"))
    assert (hit.source, hit.spec) == ("cache", other)
    assert hit.thought.endswith("(not a library entry)")
    limited = run(d2.design("r", latency_ms=10_000.0))
    assert (limited.source, limited.spec) == ("designer", LIBRARY[1].spec)


def test_verify_on_hit_refuses_and_decays_a_hit_naming_a_removed_agent() -> None:
    agents = dict(AGENTS)
    agents["gone"] = make_agent
    cache = InMemoryLRU(10)
    run(cache.store("q", spec_of("gone"), True))
    d = LibraryDesigner(LIBRARY, {}, agents, cache=cache)
    del agents["gone"]  # a mapping is re-read at every check
    result = run(d.design("q"))
    assert (result.source, result.spec) == ("designer", LIBRARY[2].spec)
    assert result.rejected_hit is not None and result.rejected_hit.spec == spec_of("gone")
    assert cache.reliability("q") == pytest.approx(0.7)
    assert cache.stats.decays == 1


def test_bad_libraries_and_limits_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"^LibraryDesigner needs a non-empty seed_library$"):
        LibraryDesigner([], {}, AGENTS)
    with pytest.raises(
        ValueError,
        match=r"^seed_library\[1\] names unregistered things \(\$\.steps\[0\]\.operation"
        r"\.agent_name: unknown agent 'nobody'\)$",
    ):
        LibraryDesigner([LIBRARY[0], spec_of("nobody")], {}, AGENTS)
    with pytest.raises(ValueError, match=r"^budget_usd must be a finite number >= 0, got -1"):
        designer(budget_usd=-1)
    d = designer()
    with pytest.raises(ValueError, match=r"^latency_ms must be a finite number >= 0, got nan"):
        run(d.design("q", latency_ms=float("nan")))
    with pytest.raises(TypeError, match=r"^budget_usd must be a number or None, got str$"):
        d.choose(budget_usd="1")  # type: ignore[arg-type]


def test_the_orchestrator_runs_the_pick_and_the_next_identical_request_hits() -> None:
    from core.runtime_design.orchestrator import TopologyOrchestrator

    cache = InMemoryLRU(10)
    orchestrator = TopologyOrchestrator(designer(cache=cache))
    first = run(orchestrator.execute("What is 2+2?"))
    assert (first.success, first.cache_hit, first.spec, first.output) == (
        True,
        False,
        LIBRARY[2].spec,
        "ok",
    )
    second = run(orchestrator.execute("What is 2+2?"))
    assert (second.success, second.cache_hit, second.spec) == (True, True, LIBRARY[2].spec)
    assert (cache.stats.hits, cache.stats.misses, cache.stats.stores) == (1, 1, 2)
