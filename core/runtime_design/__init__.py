"""Runtime topology design (issue 15): caches of topologies per goal."""

from core.runtime_design.caches import (
    DECAY_FACTOR,
    CacheHit,
    CacheStats,
    InMemoryLRU,
    MemoryStoreCache,
    NoCache,
    TopologyCache,
    normalise_goal,
)

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
