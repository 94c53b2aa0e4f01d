"""MemoryStoreCache on DuckDBMemoryStore: embedding recall against the threshold, reliability decay
until an entry stops surfacing, namespaces, and contents surviving a reopen of the DuckDB file in
another process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from core.ir.models import TopologySpec
from core.memory import DuckDBMemoryStore, MemoryEntry
from core.runtime_design import CacheStats, MemoryStoreCache, TopologyCache

SPEC_A = TypeAdapter(TopologySpec).validate_python(
    {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "a"}}]}
)
SPEC_B = TypeAdapter(TopologySpec).validate_python(
    {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "b"}}]}
)


class TableEmbedder:
    """Fixed 2-d vectors per (normalised) text, so cosines are known exactly:
    cos([4,3],[3,4]) = 24/25 = 0.96; cos([0,1],[3,4]) = 4/5 = 0.8; cos([3,4],[3,4]) = 1."""

    VECTORS: dict[str, list[float]] = {
        "add two numbers": [3.0, 4.0],
        "sum two numbers": [4.0, 3.0],
        "multiply two numbers": [0.0, 1.0],
        "unrelated": [1.0, 0.0],
    }

    @property
    def dimension(self) -> int:
        return 2

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.VECTORS[t] for t in texts]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


@pytest.fixture
def cache() -> Any:
    store = DuckDBMemoryStore(":memory:", embedder=TableEmbedder())
    yield MemoryStoreCache(store, threshold=0.85, min_reliability=0.3)
    store.close()


def test_it_is_a_topology_cache(cache: MemoryStoreCache) -> None:
    assert isinstance(cache, TopologyCache)


def test_a_hit_above_the_threshold_and_a_miss_below_it(cache: MemoryStoreCache) -> None:
    run(cache.store("Add two  numbers", SPEC_A, True))
    exact = run(cache.lookup_hit("add two numbers"))
    assert exact is not None
    assert exact.spec == SPEC_A
    assert exact.similarity == pytest.approx(1.0, abs=1e-6)
    assert exact.reliability == 1.0
    assert exact.key == "add two numbers"
    near = run(cache.lookup_hit("sum two numbers"))  # cosine 0.96 >= 0.85
    assert near is not None and near.spec == SPEC_A
    assert near.similarity == pytest.approx(0.96, abs=1e-6)
    assert run(cache.lookup_hit("multiply two numbers")) is None  # cosine 0.8 < 0.85
    assert run(cache.lookup_hit("unrelated")) is None  # cosine 0.6
    assert cache.stats == CacheStats(hits=2, misses=2, stores=1, decays=0)


def test_the_threshold_is_the_callers(cache: MemoryStoreCache) -> None:
    loose = MemoryStoreCache(cache.memory_store, threshold=0.75)
    run(loose.store("add two numbers", SPEC_A, True))
    hit = run(loose.lookup_hit("multiply two numbers"))  # 0.8 >= 0.75
    assert hit is not None and hit.similarity == pytest.approx(0.8, abs=1e-6)


def test_stored_entry_shape(cache: MemoryStoreCache) -> None:
    run(cache.store("Add two numbers", SPEC_A, True))
    (entry,) = cache.entries()
    assert entry.memory_type == "semantic"
    assert entry.key == "topology_cache:add two numbers"
    assert entry.content == "add two numbers"
    assert entry.metadata == {
        "namespace": "topology_cache",
        "goal": "Add two numbers",
        "spec": TypeAdapter(TopologySpec).dump_python(SPEC_A, mode="json"),
    }
    assert (entry.reliability, entry.uses, entry.successes) == (1.0, 1, 1)


def test_decay_over_repeated_failures_until_the_entry_stops_surfacing(
    cache: MemoryStoreCache,
) -> None:
    run(cache.store("add two numbers", SPEC_A, True))
    for expected in (0.7, 0.49, 0.343):
        run(cache.store("add two numbers", SPEC_A, False))
        hit = run(cache.lookup_hit("add two numbers"))
        assert hit is not None
        assert hit.reliability == pytest.approx(expected, rel=1e-12)
    run(cache.store("add two numbers", SPEC_A, False))
    (entry,) = cache.entries()
    assert entry.reliability == pytest.approx(0.2401, rel=1e-12)
    assert (entry.uses, entry.successes) == (5, 1)
    assert run(cache.lookup_hit("add two numbers")) is None
    assert run(cache.lookup_hit("sum two numbers")) is None
    assert cache.stats == CacheStats(hits=3, misses=2, stores=1, decays=4)


def test_a_failure_after_a_similar_hit_decays_the_entry_that_served_it(
    cache: MemoryStoreCache,
) -> None:
    run(cache.store("add two numbers", SPEC_A, True))
    hit = run(cache.lookup_hit("sum two numbers"))
    assert hit is not None
    run(cache.store("sum two numbers", hit.spec, False))
    (entry,) = cache.entries()
    assert entry.key == "topology_cache:add two numbers"
    assert entry.reliability == pytest.approx(0.7, rel=1e-12)
    # a failure of another spec near it, or of a goal far from it, decays nothing
    run(cache.store("sum two numbers", SPEC_B, False))
    run(cache.store("multiply two numbers", SPEC_A, False))
    (entry,) = cache.entries()
    assert entry.reliability == pytest.approx(0.7, rel=1e-12)
    assert cache.stats.decays == 1


def test_namespaces_and_other_memories_are_kept_apart(cache: MemoryStoreCache) -> None:
    store = cache.memory_store
    run(store.remember(MemoryEntry(memory_type="semantic", key="fact", content="add two numbers")))
    assert run(cache.lookup_hit("add two numbers")) is None
    other = MemoryStoreCache(store, namespace="other")
    run(other.store("add two numbers", SPEC_B, True))
    assert run(cache.lookup_hit("add two numbers")) is None
    run(cache.store("add two numbers", SPEC_A, True))
    mine, theirs = (
        run(cache.lookup_hit("add two numbers")),
        run(other.lookup_hit("add two numbers")),
    )
    assert mine is not None and mine.spec == SPEC_A
    assert theirs is not None and theirs.spec == SPEC_B
    assert [e.key for e in cache.entries()] == ["topology_cache:add two numbers"]


def test_bad_arguments_are_refused(cache: MemoryStoreCache) -> None:
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\], got 1.2"):
        MemoryStoreCache(cache.memory_store, threshold=1.2)
    with pytest.raises(ValueError, match=r"min_reliability must be in \[0, 1\], got -0.1"):
        MemoryStoreCache(cache.memory_store, min_reliability=-0.1)
    with pytest.raises(ValueError, match="namespace must be a non-empty string"):
        MemoryStoreCache(cache.memory_store, namespace=" ")


def test_contents_survive_a_reopen_of_the_file_in_another_process(tmp_path: Path) -> None:
    path = tmp_path / "studio.duckdb"
    with DuckDBMemoryStore(path) as store:
        cache = MemoryStoreCache(store)
        run(cache.store("What is 12 times 3?", SPEC_A, True))
        run(cache.store("What is 12 times 3?", SPEC_A, False))
    script = textwrap.dedent(
        f"""
        import asyncio, json
        from core.memory import DuckDBMemoryStore
        from core.runtime_design import MemoryStoreCache
        with DuckDBMemoryStore({str(path)!r}) as store:
            cache = MemoryStoreCache(store)
            hit = asyncio.run(cache.lookup_hit("what is 12  times 3?"))
            print(json.dumps(hit.model_dump(mode="json")))
            asyncio.run(cache.store("what is 12 times 3?", hit.spec, False))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    hit = json.loads(out.stdout)
    assert hit["spec"] == TypeAdapter(TopologySpec).dump_python(SPEC_A, mode="json")
    assert hit["key"] == "what is 12 times 3?"
    assert hit["reliability"] == pytest.approx(0.7, rel=1e-12)
    assert hit["similarity"] == pytest.approx(1.0, abs=1e-6)
    with DuckDBMemoryStore(path) as store:
        (entry,) = MemoryStoreCache(store).entries()
        assert entry.reliability == pytest.approx(0.49, rel=1e-12)
        assert (entry.uses, entry.successes) == (3, 1)


def test_lookup_returns_the_similar_entrys_spec(cache: MemoryStoreCache) -> None:
    run(cache.store("add two numbers", SPEC_A, True))
    assert run(cache.lookup("sum two numbers")) == SPEC_A  # cosine 0.96
    assert run(cache.lookup("multiply two numbers")) is None  # cosine 0.8
    assert cache.stats == CacheStats(hits=1, misses=1, stores=1, decays=0)
