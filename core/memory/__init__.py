"""Memory: the `MemoryStore` protocol and its DuckDB implementation in the run store's file."""

from core.memory.base import (
    RELIABILITY_ALPHA,
    Embedder,
    HashedNgramEmbedder,
    MemoryEntry,
    MemoryHit,
    MemoryStore,
    MemoryType,
    PydanticAIEmbedder,
    next_reliability,
)
from core.memory.duckdb_memory import MEMORY_SCHEMA_VERSION, DuckDBMemoryStore

__all__ = [
    "MEMORY_SCHEMA_VERSION",
    "RELIABILITY_ALPHA",
    "DuckDBMemoryStore",
    "Embedder",
    "HashedNgramEmbedder",
    "MemoryEntry",
    "MemoryHit",
    "MemoryStore",
    "MemoryType",
    "PydanticAIEmbedder",
    "next_reliability",
]
