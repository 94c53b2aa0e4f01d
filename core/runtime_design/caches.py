"""Topology caches for runtime design: `TopologyCache`, `NoCache`, `InMemoryLRU`, `MemoryStoreCache`.

A cache maps a request's goal to a topology that served it (runtime contract 5). Every
cache implements the `TopologyCache` protocol:

- `await cache.lookup(goal) -> TopologySpec | None`: the cached spec (the reference guide's
  form: "hit returns the prior spec");
- `await cache.lookup_hit(goal) -> CacheHit | None`: the same lookup with the hit's details:
  the spec, its similarity to `goal` (cosine in [-1, 1]; 1.0 for an exact key match), its
  reliability in [0, 1] and the key it is stored under (the designer and the studio use it);
- `await cache.store(goal, spec, success)`: `success=True` adds (or refreshes) the entry of
  `goal`; `success=False` decays the entry that served `goal` (a failed run or a bad verdict);
- `cache.stats`: a `CacheStats` of its counters (hits, misses, stores, decays).

Goals are normalised before they are used as keys (`normalise_goal`): Unicode case-folded
(`str.casefold`), every run of whitespace collapsed to one space, leading and trailing
whitespace removed. So `"  What is 2+2?\\n"` and `"what IS 2+2?"` are the same key.

Reliability follows the memory store's rule (`core.memory.next_reliability`): an exponential
moving average `r <- (1 - alpha) * r + alpha * outcome` with `alpha = RELIABILITY_ALPHA = 0.3`,
so each failure multiplies the reliability by `DECAY_FACTOR = 0.7`. A new entry starts at 1.0;
from there a failure leaves 0.7, then 0.49, 0.343, 0.2401: with the default
`min_reliability=0.3`, the fourth consecutive failure stops the entry surfacing. Entries below
`min_reliability` are never returned by `lookup` (an entry exactly at the floor is).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from core.ir.canonical import canonical_json
from core.ir.models import TopologySpec
from core.memory.base import RELIABILITY_ALPHA, MemoryEntry, MemoryStore, next_reliability

__all__ = [
    "DECAY_FACTOR",
    "CacheHit",
    "CacheStats",
    "InMemoryLRU",
    "MemoryStoreCache",
    "NoCache",
    "TopologyCache",
    "normalise_goal",
]

DECAY_FACTOR = 1 - RELIABILITY_ALPHA
"""What one failure multiplies an entry's reliability by (0.7)."""

_SPEC_ADAPTER: TypeAdapter[Any] = TypeAdapter(TopologySpec)
_WHITESPACE = re.compile(r"\s+")


def normalise_goal(goal: str) -> str:
    """The cache key of `goal`: case-folded, whitespace runs collapsed to one space, stripped.

    Raises:
        TypeError: `goal` is not a string.
        ValueError: `goal` is empty or only whitespace.
    """
    if not isinstance(goal, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"a cache goal must be a string, got {type(goal).__name__}")
    key = _WHITESPACE.sub(" ", goal.casefold()).strip()
    if not key:
        raise ValueError("a cache goal must not be empty or only whitespace")
    return key


class CacheHit(BaseModel):
    """A cached topology found for a goal."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    spec: TopologySpec
    """The cached topology."""
    similarity: float
    """Cosine similarity of the goal to the cached entry's goal (1.0 for an exact key)."""
    reliability: float = Field(ge=0.0, le=1.0)
    """The entry's reliability in [0, 1] (1.0 new; times `DECAY_FACTOR` per failure)."""
    key: str
    """The normalised goal the entry was stored under."""


class CacheStats(BaseModel):
    """A cache's counters since it was made (not persisted)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    hits: int = 0
    """Lookups that returned an entry."""
    misses: int = 0
    """Lookups that returned None."""
    stores: int = 0
    """Successful outcomes stored (entries added or refreshed)."""
    decays: int = 0
    """Failures that lowered an entry's reliability."""

    @property
    def hit_rate(self) -> float:
        """hits / (hits + misses), 0.0 before any lookup."""
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@runtime_checkable
class TopologyCache(Protocol):
    """Where the runtime designer remembers which topology served which goal."""

    @property
    def stats(self) -> CacheStats:
        """The counters."""
        ...

    async def lookup(self, goal: str) -> Any:
        """The cached `TopologySpec` for `goal`, or None."""
        ...

    async def lookup_hit(self, goal: str) -> CacheHit | None:
        """The cached topology for `goal` with its similarity and reliability, or None."""
        ...

    async def store(self, goal: str, spec: Any, success: bool) -> None:
        """Record one outcome of running `spec` for `goal`."""
        ...


def _check_spec(spec: Any) -> Any:
    """`spec` validated as a `TopologySpec` (a model or its dict)."""
    try:
        return _SPEC_ADAPTER.validate_python(spec)
    except Exception as exc:
        raise ValueError(f"cache store: spec is not a valid TopologySpec: {exc}") from exc


async def _spec_only(cache: TopologyCache, goal: str) -> Any:
    """`cache.lookup_hit(goal)`'s spec, or None (one lookup, counted once)."""
    hit = await cache.lookup_hit(goal)
    return None if hit is None else hit.spec


def _check_floor(name: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return float(value)


class NoCache:
    """The cache that never hits: every lookup is a miss, stores are counted and dropped."""

    def __init__(self) -> None:
        self._stats = CacheStats()

    @property
    def stats(self) -> CacheStats:
        """The counters (only misses and stores move)."""
        return self._stats

    async def lookup(self, goal: str) -> Any:
        """The cached `TopologySpec` of `lookup_hit(goal)`, or None."""
        return await _spec_only(self, goal)

    async def lookup_hit(self, goal: str) -> CacheHit | None:
        """Always None (counts a miss)."""
        normalise_goal(goal)
        self._stats.misses += 1
        return None

    async def store(self, goal: str, spec: Any, success: bool) -> None:
        """Nothing kept; a success counts a store."""
        normalise_goal(goal)
        _check_spec(spec)
        if success:
            self._stats.stores += 1


class InMemoryLRU:
    """An exact-match cache on the normalised goal, least recently used evicted first.

    A lookup hit or a successful store makes the entry the most recently used; storing a new
    goal into a full cache evicts the least recently used one. A failure decays the entry of
    that exact goal (unknown goals are ignored). Not shared between processes.

    Args:
        maxsize: how many goals are kept (>= 1).
        min_reliability: entries below it are not returned, in [0, 1].

    Raises:
        ValueError: `maxsize` < 1 or `min_reliability` outside [0, 1].
    """

    def __init__(self, maxsize: int = 128, *, min_reliability: float = 0.3) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"InMemoryLRU maxsize must be an integer >= 1, got {maxsize!r}")
        self.maxsize = maxsize
        self.min_reliability = _check_floor("InMemoryLRU min_reliability", min_reliability)
        self._entries: OrderedDict[str, tuple[Any, float]] = OrderedDict()
        self._stats = CacheStats()

    @property
    def stats(self) -> CacheStats:
        """The counters."""
        return self._stats

    def keys(self) -> list[str]:
        """The normalised goals held, least recently used first."""
        return list(self._entries)

    def reliability(self, goal: str) -> float | None:
        """The reliability of `goal`'s entry, or None when it is not held (no LRU move)."""
        item = self._entries.get(normalise_goal(goal))
        return None if item is None else item[1]

    def __len__(self) -> int:
        return len(self._entries)

    async def lookup(self, goal: str) -> Any:
        """The cached `TopologySpec` of `lookup_hit(goal)`, or None."""
        return await _spec_only(self, goal)

    async def lookup_hit(self, goal: str) -> CacheHit | None:
        """The entry of exactly this normalised goal (similarity 1.0), unless it is below
        `min_reliability`; a hit becomes the most recently used."""
        key = normalise_goal(goal)
        item = self._entries.get(key)
        if item is None or item[1] < self.min_reliability:
            self._stats.misses += 1
            return None
        self._entries.move_to_end(key)
        self._stats.hits += 1
        return CacheHit(spec=item[0], similarity=1.0, reliability=item[1], key=key)

    async def store(self, goal: str, spec: Any, success: bool) -> None:
        """On success put `spec` under the goal (reliability 1.0 new, else one success step of
        the moving average) as the most recently used, evicting the least recently used over
        `maxsize`; on failure multiply that goal's reliability by `DECAY_FACTOR`."""
        key = normalise_goal(goal)
        checked = _check_spec(spec)
        old = self._entries.get(key)
        if not success:
            if old is not None:
                self._entries[key] = (old[0], next_reliability(old[1], False))
                self._stats.decays += 1
            return
        reliability = 1.0 if old is None else next_reliability(old[1], True)
        self._entries[key] = (checked, reliability)
        self._entries.move_to_end(key)
        self._stats.stores += 1
        while len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)


class MemoryStoreCache:
    """A semantic cache on a `MemoryStore` (e.g. `DuckDBMemoryStore`): embedding recall,
    reliability decay, entries kept in the store's file across processes.

    Each goal is one `semantic` memory entry with key `"{namespace}:{normalised goal}"`,
    content the normalised goal (what is embedded), and metadata
    `{"namespace": ..., "goal": <the goal as given>, "spec": <TopologySpec JSON>}`. A lookup
    recalls the most similar entry of the namespace with similarity >= `threshold` and
    reliability >= `min_reliability`. A successful store remembers the entry (a new one starts
    at reliability 1.0) and records a success (`update_reliability`); a failure records a
    failure on the entry of that exact goal, else on the nearest entry of the namespace above
    the threshold holding the same spec (the one a lookup served), which multiplies its
    reliability by `DECAY_FACTOR`. A failure matching no entry changes nothing.

    Args:
        store: the memory store (its embedder decides similarity); kept as `memory_store`.
        threshold: the least cosine similarity of a hit, in [0, 1].
        namespace: keeps these entries apart from the store's other semantic entries.
        min_reliability: entries below it are never returned, in [0, 1].

    Raises:
        ValueError: `threshold` or `min_reliability` outside [0, 1], or an empty namespace.
    """

    def __init__(
        self,
        store: MemoryStore,
        threshold: float = 0.85,
        namespace: str = "topology_cache",
        min_reliability: float = 0.3,
    ) -> None:
        self.memory_store = store
        self.threshold = _check_floor("MemoryStoreCache threshold", threshold)
        self.min_reliability = _check_floor("MemoryStoreCache min_reliability", min_reliability)
        if not isinstance(namespace, str) or not namespace.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(
                f"MemoryStoreCache namespace must be a non-empty string, got {namespace!r}"
            )
        self.namespace = namespace
        self._stats = CacheStats()

    @property
    def stats(self) -> CacheStats:
        """The counters (this process's, not persisted)."""
        return self._stats

    def _key(self, normalised: str) -> str:
        return f"{self.namespace}:{normalised}"

    def entries(self) -> list[MemoryEntry]:
        """This namespace's entries, by key."""
        prefix = f"{self.namespace}:"
        return [
            e
            for e in self.memory_store.entries("semantic")
            if e.key.startswith(prefix) and e.metadata.get("namespace") == self.namespace
        ]

    async def _nearest(
        self, normalised: str, min_reliability: float
    ) -> list[tuple[MemoryEntry, float]]:
        """This namespace's entries above the threshold, best first."""
        k = 8
        while True:
            hits = await self.memory_store.recall(
                normalised,
                memory_type="semantic",
                k=k,
                min_reliability=min_reliability,
                min_similarity=self.threshold,
            )
            ours = [
                (h.entry, h.similarity)
                for h in hits
                if h.entry.metadata.get("namespace") == self.namespace
            ]
            if ours or len(hits) < k:
                return ours
            k *= 4

    async def lookup(self, goal: str) -> Any:
        """The cached `TopologySpec` of `lookup_hit(goal)`, or None."""
        return await _spec_only(self, goal)

    async def lookup_hit(self, goal: str) -> CacheHit | None:
        """The most similar entry with similarity >= `threshold` and reliability >=
        `min_reliability`, or None."""
        normalised = normalise_goal(goal)
        found = await self._nearest(normalised, self.min_reliability)
        if not found:
            self._stats.misses += 1
            return None
        entry, similarity = found[0]
        self._stats.hits += 1
        return CacheHit(
            spec=_SPEC_ADAPTER.validate_python(entry.metadata["spec"]),
            similarity=similarity,
            reliability=entry.reliability,
            key=entry.key.removeprefix(f"{self.namespace}:"),
        )

    async def store(self, goal: str, spec: Any, success: bool) -> None:
        """Record one outcome of `spec` for `goal` (see the class docstring)."""
        normalised = normalise_goal(goal)
        checked = _check_spec(spec)
        key = self._key(normalised)
        if success:
            stored = await self.memory_store.remember(
                MemoryEntry(
                    memory_type="semantic",
                    key=key,
                    content=normalised,
                    metadata={
                        "namespace": self.namespace,
                        "goal": goal,
                        "spec": _SPEC_ADAPTER.dump_python(checked, mode="json"),
                    },
                )
            )
            self.memory_store.update_reliability(stored.id, True)
            self._stats.stores += 1
            return
        target = self.memory_store.get("semantic", key)
        if target is None:
            wanted = canonical_json(checked)
            for entry, _similarity in await self._nearest(normalised, 0.0):
                if canonical_json(_SPEC_ADAPTER.validate_python(entry.metadata["spec"])) == wanted:
                    target = entry
                    break
        if target is None:
            return
        self.memory_store.update_reliability(target.id, False)
        self._stats.decays += 1
