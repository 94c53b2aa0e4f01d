"""The `MemoryStore` protocol, its entries, and the embedders recall uses.

Memory has three kinds of entry (`MemoryType`): `episodic` (what happened: one record per
successful subtask run), `semantic` (facts), and `procedural` (skills: how to do something; the
orchestrator's roster of agent specs, keyed by the subtask trigger they were made for). Each
entry has a reliability in [0, 1] that `update_reliability` moves after each use, as an
exponential moving average, `r <- (1 - alpha) * r + alpha * outcome` with outcome 1 for a
success and 0 for a failure (`RELIABILITY_ALPHA` = 0.3), so a specialist that keeps failing
decays towards 0 and drops below a recall's `min_reliability`.

Recall ranks by the cosine similarity of embeddings. `HashedNgramEmbedder` is the offline
default: deterministic, no model, no download, but *lexical, not semantic*: texts that share
character trigrams are close, synonyms are not. `PydanticAIEmbedder` uses pydantic-ai's
`Embedder`, so any embedding provider works.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "RELIABILITY_ALPHA",
    "Embedder",
    "HashedNgramEmbedder",
    "MemoryEntry",
    "MemoryHit",
    "MemoryStore",
    "MemoryType",
    "PydanticAIEmbedder",
    "next_reliability",
]

MemoryType = Literal["episodic", "semantic", "procedural"]
"""The kinds of memory entry."""

RELIABILITY_ALPHA = 0.3
"""The weight of the latest outcome in `update_reliability`'s moving average."""


def next_reliability(current: float, success: bool, alpha: float = RELIABILITY_ALPHA) -> float:
    """`(1 - alpha) * current + alpha * (1.0 if success else 0.0)`."""
    return (1 - alpha) * current + alpha * (1.0 if success else 0.0)


class MemoryEntry(BaseModel):
    """One stored memory (a frozen record)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    id: str = ""
    """The store's id ("" before it is stored)."""
    memory_type: MemoryType
    """Which kind of memory."""
    key: str
    """What it is about: a procedural entry's trigger, an episode's subtask, a fact's subject."""
    content: str
    """The text recalled by similarity (and embedded)."""
    metadata: dict[str, Any] = Field(default_factory=dict[str, Any])
    """Structured data, e.g. a procedural entry's `{"agent_spec": {...}}`."""
    reliability: float = Field(default=1.0, ge=0.0, le=1.0)
    """How well it has worked, in [0, 1]."""
    uses: int = Field(default=0, ge=0)
    """How many outcomes were recorded."""
    successes: int = Field(default=0, ge=0)
    """How many of them succeeded."""
    created_at: float = 0.0
    """When it was first stored, Unix seconds."""
    updated_at: float = 0.0
    """When it last changed, Unix seconds."""


class MemoryHit(BaseModel):
    """A recalled entry and how similar it is to the query."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    entry: MemoryEntry
    similarity: float


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one fixed dimension."""

    @property
    def dimension(self) -> int:
        """The vectors' length."""
        ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...


_WORDS = re.compile(r"[a-z0-9]+")


class HashedNgramEmbedder:
    """Deterministic lexical embeddings: hashed character trigrams of the lower-cased words.

    Each word is padded with spaces, cut into character trigrams, and each trigram adds +1 or
    -1 (by its BLAKE2b hash) at a hashed index; the vector is L2-normalized. Lexical, not
    semantic.

    Args:
        dimension: the vector length.
    """

    def __init__(self, dimension: int = 256) -> None:
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        """The vector length."""
        return self._dimension

    def embed_one(self, text: str) -> list[float]:
        """The vector of one text (all zeros for a text without letters or digits)."""
        vec = [0.0] * self._dimension
        for word in _WORDS.findall(text.lower()):
            padded = f" {word} "
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                vec[value % self._dimension] += 1.0 if (value >> 63) & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vec))
        return [v / norm for v in vec] if norm else vec

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """`embed_one` of each text."""
        return [self.embed_one(t) for t in texts]


class PydanticAIEmbedder:
    """Embeddings from pydantic-ai's `Embedder` (any provider: `"openai:text-embedding-3-small"`).

    Args:
        model: a pydantic-ai embedding model or its `"provider:model"` name.
        dimension: the model's vector length.
    """

    def __init__(self, model: Any, dimension: int) -> None:
        from pydantic_ai.embeddings import Embedder as PaiEmbedder

        self._embedder = PaiEmbedder(model)
        self._dimension = dimension

    @property
    def dimension(self) -> int:
        """The vector length."""
        return self._dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The provider's vectors for `texts`."""
        result = await self._embedder.embed_documents(list(texts))
        return [list(map(float, v)) for v in result.embeddings]


@runtime_checkable
class MemoryStore(Protocol):
    """Where the runtime remembers: episodic, semantic and procedural entries with reliability.

    A store must keep entries across processes when it is backed by a file (the roster is
    found by the next process), `remember` must replace the entry of the same
    `(memory_type, key)`, and `recall` must rank by similarity, best first, ties by key.
    """

    async def remember(self, entry: MemoryEntry) -> MemoryEntry:
        """Store `entry` (replacing the one of the same type and key); returns it with its id."""
        ...

    async def recall(
        self,
        query: str,
        *,
        memory_type: MemoryType | None = None,
        k: int = 5,
        min_reliability: float = 0.0,
        min_similarity: float = 0.0,
    ) -> list[MemoryHit]:
        """The `k` entries most similar to `query`."""
        ...

    def get(self, memory_type: MemoryType, key: str) -> MemoryEntry | None:
        """The entry of that type and key, or None."""
        ...

    def entries(self, memory_type: MemoryType | None = None) -> list[MemoryEntry]:
        """Every entry (of one type), by key."""
        ...

    def update_reliability(self, entry_id: str, success: bool) -> MemoryEntry:
        """Record one outcome of the entry and return it updated."""
        ...

    def close(self) -> None:
        """Release the store's resources (its database file)."""
        ...


def entry_from_row(row: Mapping[str, Any]) -> MemoryEntry:
    """A `MemoryEntry` from a stored row's columns."""
    import json

    return MemoryEntry(
        id=str(row["id"]),
        memory_type=row["memory_type"],
        key=str(row["key"]),
        content=str(row["content"]),
        metadata=json.loads(row["metadata"] or "{}"),
        reliability=float(row["reliability"]),
        uses=int(row["uses"]),
        successes=int(row["successes"]),
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
    )
