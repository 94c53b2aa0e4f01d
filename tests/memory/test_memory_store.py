"""DuckDBMemoryStore (runtime contract 5): tables in the run store's own file, recall by DuckDB's
array cosine similarity over hashed n-gram embeddings, reliability decay, and a roster that a
second process finds."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import pytest

from core.errors import StoreBusyError
from core.memory import (
    DuckDBMemoryStore,
    HashedNgramEmbedder,
    MemoryEntry,
    MemoryStore,
    next_reliability,
)
from core.storage import DuckDBRunStore


def test_the_hashed_embedder_is_deterministic_lexical_and_normalized() -> None:
    emb = HashedNgramEmbedder(dimension=64)
    a = emb.embed_one("rate limit analysis")
    assert a == emb.embed_one("Rate-limit ANALYSIS!")
    assert abs(sum(v * v for v in a) - 1.0) < 1e-9
    assert emb.embed_one("...") == [0.0] * 64


def test_recall_ranks_by_similarity_and_filters_reliability() -> None:
    store = DuckDBMemoryStore()
    assert isinstance(store, MemoryStore)

    async def go() -> list[tuple[str, float]]:
        await store.remember(
            MemoryEntry(
                memory_type="procedural",
                key="analyse rate limits",
                content="analyse rate limit errors",
            )
        )
        await store.remember(
            MemoryEntry(memory_type="procedural", key="summarise", content="summarise a report")
        )
        await store.remember(
            MemoryEntry(memory_type="semantic", key="p95", content="rate limit is 100/s")
        )
        hits = await store.recall("rate limit errors", memory_type="procedural", k=5)
        return [(h.entry.key, round(h.similarity, 6)) for h in hits]

    ranked = asyncio.run(go())
    assert [k for k, _ in ranked] == ["analyse rate limits", "summarise"]
    assert ranked[0][1] > 0.7 > ranked[1][1]
    entry = store.get("procedural", "analyse rate limits")
    assert entry is not None
    for _ in range(3):
        entry = store.update_reliability(entry.id, success=False)
    assert entry.reliability == pytest.approx(0.343, abs=1e-12)
    assert (entry.uses, entry.successes) == (3, 0)
    left = asyncio.run(
        store.recall("rate limit errors", memory_type="procedural", min_reliability=0.5)
    )
    assert [h.entry.key for h in left] == ["summarise"]
    assert next_reliability(0.5, True) == pytest.approx(0.65)
    store.close()


def test_remember_replaces_by_type_and_key_keeping_id_and_reliability() -> None:
    store = DuckDBMemoryStore()
    first = asyncio.run(store.remember(MemoryEntry(memory_type="procedural", key="k", content="a")))
    store.update_reliability(first.id, success=True)
    again = asyncio.run(
        store.remember(
            MemoryEntry(memory_type="procedural", key="k", content="b", metadata={"v": 2})
        )
    )
    assert again.id == first.id
    assert [e.content for e in store.entries("procedural")] == ["b"]
    stored = store.get("procedural", "k")
    assert stored is not None and stored.uses == 1 and stored.metadata == {"v": 2}


def test_memory_lives_in_the_run_store_file(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    DuckDBRunStore(db).close()
    with DuckDBMemoryStore(db) as store:
        asyncio.run(store.remember(MemoryEntry(memory_type="episodic", key="e", content="x")))
    con = duckdb.connect(str(db), read_only=True)
    tables = {
        r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()
    }
    con.close()
    assert {"runs", "memory_entries", "memory_schema"} <= tables
    run_store = DuckDBRunStore(db)  # the run store still opens the shared file
    run_store.close()


def test_one_process_opens_the_run_store_and_memory_on_one_file(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    runs = DuckDBRunStore(db)  # the studio holds its run store while a page reads memory
    with DuckDBMemoryStore(db) as memory:
        asyncio.run(memory.remember(MemoryEntry(memory_type="semantic", key="k", content="c")))
    assert len(runs.list_runs()) == 0
    with DuckDBMemoryStore(db) as memory:
        assert [e.key for e in memory.entries()] == ["k"]
    runs.close()


SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from core.memory import DuckDBMemoryStore, MemoryEntry
    path, mode = sys.argv[1], sys.argv[2]
    store = DuckDBMemoryStore(path)
    if mode == "write":
        asyncio.run(store.remember(MemoryEntry(
            memory_type="procedural", key="investigate latency",
            content="investigate a latency regression",
            metadata={"agent_spec": {"name": "latency_analyst"}})))
        print("stored")
    else:
        hits = asyncio.run(store.recall("latency regression", memory_type="procedural", k=1))
        print(hits[0].entry.metadata["agent_spec"]["name"], round(hits[0].similarity, 3) > 0.5)
    store.close()
    """
)


def test_a_second_process_finds_the_first_ones_roster(tmp_path: Path) -> None:
    db = str(tmp_path / "studio.duckdb")
    run = [sys.executable, "-c", SCRIPT, db]
    first = subprocess.run([*run, "write"], capture_output=True, text=True, check=True)
    assert first.stdout.strip() == "stored"
    second = subprocess.run([*run, "read"], capture_output=True, text=True, check=True)
    assert second.stdout.strip() == "latency_analyst True"


def test_a_held_file_is_busy_for_another_process(tmp_path: Path) -> None:
    db = tmp_path / "studio.duckdb"
    with DuckDBMemoryStore(db):
        code = (
            "import sys\nfrom core.memory import DuckDBMemoryStore\nfrom core.errors import "
            "StoreBusyError\ntry:\n    DuckDBMemoryStore(sys.argv[1])\nexcept StoreBusyError:\n"
            "    print('busy')\n"
        )
        out = subprocess.run([sys.executable, "-c", code, str(db)], capture_output=True, text=True)
        assert out.stdout.strip() == "busy", out.stderr
    assert StoreBusyError is not None
