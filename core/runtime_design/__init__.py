"""Runtime topology design (issue 15): caches of topologies per goal and the runtime designer."""

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
from core.runtime_design.designer import (
    DesignResult,
    LibraryEntry,
    RuntimeDesignError,
    RuntimeTopologyDesigner,
)

__all__ = [
    "DECAY_FACTOR",
    "CacheHit",
    "CacheStats",
    "DesignResult",
    "InMemoryLRU",
    "LibraryEntry",
    "MemoryStoreCache",
    "NoCache",
    "RuntimeDesignError",
    "RuntimeTopologyDesigner",
    "TopologyCache",
    "normalise_goal",
]
