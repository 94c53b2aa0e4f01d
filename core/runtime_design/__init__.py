"""Runtime topology design: caches of topologies per goal, the runtime designer and
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
from core.runtime_design.library import LibraryChoice, LibraryDesigner
from core.runtime_design.orchestrator import (
    OutputJudge,
    TopologyExecutionResult,
    TopologyOrchestrator,
)
from core.runtime_design.seed import (
    LIBRARY_FORMAT,
    SeedLibraryError,
    library_to_json,
    load_library,
    seed_library_from_run,
)

__all__ = [
    "DECAY_FACTOR",
    "LIBRARY_FORMAT",
    "CacheHit",
    "CacheStats",
    "DesignResult",
    "InMemoryLRU",
    "LibraryChoice",
    "LibraryDesigner",
    "LibraryEntry",
    "MemoryStoreCache",
    "NoCache",
    "OutputJudge",
    "RuntimeDesignError",
    "RuntimeTopologyDesigner",
    "SeedLibraryError",
    "TopologyCache",
    "TopologyExecutionResult",
    "TopologyOrchestrator",
    "library_to_json",
    "load_library",
    "normalise_goal",
    "seed_library_from_run",
]
