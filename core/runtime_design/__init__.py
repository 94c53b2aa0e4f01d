"""Runtime topology design (issue 15): caches of topologies per goal, the runtime designer and
the topology orchestrator that runs a designed topology per request and learns from it."""

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
from core.runtime_design.orchestrator import (
    OutputJudge,
    TopologyExecutionResult,
    TopologyOrchestrator,
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
    "OutputJudge",
    "RuntimeDesignError",
    "RuntimeTopologyDesigner",
    "TopologyCache",
    "TopologyExecutionResult",
    "TopologyOrchestrator",
    "normalise_goal",
]
