"""`LibraryDesigner`: the runtime designer that needs no model.

It picks a topology from a seed library (e.g. `seed_library_from_run`) by one fixed rule, on the
figures the search measured per request (accuracy in [0, 1], cost in USD, latency in ms):

1. **Limits stated** (`budget_usd` and/or `latency_ms`, per call or the designer's defaults):
   an entry is *within* them when its `cost_usd <= budget_usd` and its `latency_ms <=
   latency_ms` (a figure that was not measured is never within a stated limit). Among the
   entries within: the highest accuracy. When none is within: **the cheapest** entry (lowest
   `cost_usd`), and the reason says no entry was within the limits.
2. **No limits**: the highest measured accuracy.

Ties: by accuracy, the lower cost, then the lower latency, then the earlier entry; for the
cheapest, the higher accuracy, then the earlier entry. An unmeasured accuracy ranks below any
measured one, an unmeasured cost above any measured one.

`await designer.design(goal, budget_usd=None, latency_ms=None) -> DesignResult`, the interface
of `RuntimeTopologyDesigner` (it is one, so `TopologyOrchestrator` takes it; `designer_agent`
is None and never called):

- **Cache first.** `cache.lookup_hit(goal)` (the cache's rule: exact normalised goal for
  `InMemoryLRU`, embedding similarity for `MemoryStoreCache`, so similar goals it has served
  get the same topology). With `verify_on_hit` a hit naming anything the registries no longer
  resolve is refused and decayed, as in `RuntimeTopologyDesigner`. A hit is also refused, not
  decayed (nothing failed), when it is a library entry outside the request's limits or less
  accurate than the rule's pick for them (the same question asked first with a tight budget,
  then with none, gets the better entry the second time), or a spec outside the library while
  limits are stated (it has no figures to check). A refused hit is in `rejected_hit`, and the
  rule above chooses.
- **Else the rule.** `source="designer"`, `thought` the reason in words (which entry, its
  figures and why), no model usage.

The designer never stores into the cache: whoever runs the topology does (the orchestrator,
`serve-topology`), once it knows how the run went.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from core.hydrate import AgentRegistryLike, CallableRegistryLike
from core.ir.canonical import canonical_json
from core.runtime_design.caches import CacheHit, TopologyCache
from core.runtime_design.designer import DesignResult, LibraryEntry, RuntimeTopologyDesigner

__all__ = ["LibraryChoice", "LibraryDesigner"]


def _limit(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"{name} must be a number or None, got {type(value).__name__}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return number


def _money(value: float | None) -> str:
    return "cost not measured" if value is None else f"${value:.6f}"


def _ms(value: float | None) -> str:
    return "latency not measured" if value is None else f"{value:.1f} ms"


def _acc(value: float | None) -> str:
    return "accuracy not measured" if value is None else f"accuracy {value:.4f}"


class LibraryChoice:
    """The rule's pick: `index` into the library (0-based), the `entry`, the `reason` in words
    and `within` (False only when limits were stated and no entry met them)."""

    __slots__ = ("entry", "index", "reason", "within")

    def __init__(self, index: int, entry: LibraryEntry, reason: str, within: bool) -> None:
        self.index = index
        self.entry = entry
        self.reason = reason
        self.within = within

    def __repr__(self) -> str:
        return f"LibraryChoice(index={self.index}, within={self.within}, reason={self.reason!r})"


class LibraryDesigner(RuntimeTopologyDesigner):
    """Picks from a seed library by a documented rule, with no model (see the module docstring).

    Args:
        seed_library: the entries to choose from (`LibraryEntry`s with measured figures; bare
            specs are accepted but have no figures, so they are chosen only as a last resort).
        callable_registry: the callables the specs may name (as for
            `RuntimeTopologyDesigner`); every library entry must resolve in it now.
        agent_registry: the agents the specs may name, likewise.
        cache: the cache consulted first (`NoCache()` by default).
        verify_on_hit: re-check a cache hit's names against the registries.
        budget_usd: the default cost limit per request, USD (None: no limit).
        latency_ms: the default latency limit per request, ms (None: no limit).

    Raises:
        ValueError: the library is empty, an entry is invalid, an entry names something the
            registries lack (its index and the names), or a default limit is negative or
            not finite.
        TypeError: a registry is neither a registry nor a mapping, or a limit is not a number.
    """

    def __init__(
        self,
        seed_library: Iterable[Any],
        callable_registry: CallableRegistryLike,
        agent_registry: AgentRegistryLike,
        cache: TopologyCache | None = None,
        verify_on_hit: bool = True,
        *,
        budget_usd: float | None = None,
        latency_ms: float | None = None,
    ) -> None:
        super().__init__(
            None,
            callable_registry,
            agent_registry,
            seed_library=seed_library,
            cache=cache,
            verify_on_hit=verify_on_hit,
        )
        if not self.seed_library:
            raise ValueError("LibraryDesigner needs a non-empty seed_library")
        for i, entry in enumerate(self.seed_library):
            unknown = self.unknown_names(entry.spec)
            if unknown:
                listed = ", ".join(
                    f"{path}: unknown {kind} {name!r}" for path, kind, name in unknown
                )
                raise ValueError(f"seed_library[{i}] names unregistered things ({listed})")
        self.budget_usd = _limit("budget_usd", budget_usd)
        self.latency_ms = _limit("latency_ms", latency_ms)
        self._by_json = {canonical_json(e.spec): i for i, e in enumerate(self.seed_library)}

    def entry_index(self, spec: Any) -> int | None:
        """The index of the first library entry whose spec is `spec` (canonically), else None."""
        try:
            return self._by_json.get(canonical_json(spec))
        except Exception:  # noqa: BLE001 (not a spec: not in the library)
            return None

    def _name(self, i: int) -> str:
        label = self.seed_library[i].label
        return f"library entry {i + 1}" + (f" ({label})" if label else "")

    def _figures(self, entry: LibraryEntry) -> str:
        return f"{_acc(entry.accuracy)}, {_money(entry.cost_usd)}, {_ms(entry.latency_ms)}"

    @staticmethod
    def _within(entry: LibraryEntry, budget: float | None, latency: float | None) -> bool:
        if budget is not None and (entry.cost_usd is None or entry.cost_usd > budget):
            return False
        return latency is None or (entry.latency_ms is not None and entry.latency_ms <= latency)

    def choose(
        self, budget_usd: float | None = None, latency_ms: float | None = None
    ) -> LibraryChoice:
        """The rule's pick for these limits (None: no limit; the designer's defaults are not
        applied here).

        Raises:
            ValueError, TypeError: a limit is negative, not finite or not a number.
        """
        budget = _limit("budget_usd", budget_usd)
        latency = _limit("latency_ms", latency_ms)
        entries = self.seed_library
        inf = math.inf

        def by_accuracy(i: int) -> tuple[float, float, float, int]:
            e = entries[i]
            acc = -inf if e.accuracy is None else e.accuracy
            cost = inf if e.cost_usd is None else e.cost_usd
            lat = inf if e.latency_ms is None else e.latency_ms
            return (-acc, cost, lat, i)

        limits: list[str] = []
        if budget is not None:
            limits.append(f"budget ${budget:.6f}")
        if latency is not None:
            limits.append(f"latency {latency:.1f} ms")
        stated = " and ".join(limits)
        if not limits:
            i = min(range(len(entries)), key=by_accuracy)
            reason = f"{self._name(i)}: the best measured accuracy ({self._figures(entries[i])})"
            return LibraryChoice(i, entries[i], reason, True)
        inside = [i for i, e in enumerate(entries) if self._within(e, budget, latency)]
        if inside:
            i = min(inside, key=by_accuracy)
            reason = (
                f"{self._name(i)}: the best accuracy within {stated} ({self._figures(entries[i])})"
            )
            return LibraryChoice(i, entries[i], reason, True)

        def by_cost(i: int) -> tuple[float, float, int]:
            e = entries[i]
            cost = inf if e.cost_usd is None else e.cost_usd
            acc = -inf if e.accuracy is None else e.accuracy
            return (cost, -acc, i)

        i = min(range(len(entries)), key=by_cost)
        reason = (
            f"no library entry is within {stated}: the cheapest, {self._name(i)} "
            f"({self._figures(entries[i])})"
        )
        return LibraryChoice(i, entries[i], reason, False)

    def _hit_fits(self, hit: CacheHit, budget: float | None, latency: float | None) -> bool:
        """The hit may serve these limits: a library entry within them whose accuracy is at
        least the rule's pick's (so a request with a looser limit, or none, is never served a
        cheaper entry an earlier, tighter request cached); a spec outside the library only
        when no limit is stated (it has no figures to check)."""
        limited = budget is not None or latency is not None
        i = self.entry_index(hit.spec)
        if i is None:
            return not limited
        entry = self.seed_library[i]
        if limited and not self._within(entry, budget, latency):
            return False
        pick = self.choose(budget, latency).entry
        return _accuracy_rank(entry) >= _accuracy_rank(pick)

    async def design(
        self,
        goal: str,
        *,
        budget_usd: float | None = None,
        latency_ms: float | None = None,
    ) -> DesignResult:
        """The topology for `goal` under these limits (None: the designer's default).

        Returns:
            `source="cache"` (the hit in `cache_hit`, the reason in `thought`) or
            `source="designer"` (the rule's pick, the reason in `thought`; a refused hit in
            `rejected_hit`); never `"fallback"`, never any model usage.

        Raises:
            ValueError, TypeError: `goal` is empty or not a string (from the cache), or a limit
                is negative, not finite or not a number.
        """
        budget = _limit("budget_usd", budget_usd) if budget_usd is not None else self.budget_usd
        latency = _limit("latency_ms", latency_ms) if latency_ms is not None else self.latency_ms
        hit = await self.cache.lookup_hit(goal)
        rejected: CacheHit | None = None
        if hit is not None:
            if self.verify_on_hit and self.unknown_names(hit.spec):
                rejected = hit
                await self.cache.store(goal, hit.spec, False)
            elif not self._hit_fits(hit, budget, latency):
                rejected = hit
            else:
                i = self.entry_index(hit.spec)
                where = "not a library entry" if i is None else self._name(i)
                thought = (
                    f"cache hit: similarity {hit.similarity:.3f} to {hit.key!r}, "
                    f"reliability {hit.reliability:.3f} ({where})"
                )
                return DesignResult(
                    goal=goal, spec=hit.spec, source="cache", cache_hit=hit, thought=thought
                )
        choice = self.choose(budget, latency)
        return DesignResult(
            goal=goal,
            spec=choice.entry.spec,
            source="designer",
            thought=choice.reason,
            rejected_hit=rejected,
        )


def _accuracy_rank(entry: LibraryEntry) -> float:
    """An entry's measured accuracy, an unmeasured one below any measured (-1)."""
    return -1.0 if entry.accuracy is None else entry.accuracy
