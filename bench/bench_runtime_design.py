"""Runtime topology design benchmark: GSM8K requests served from a seed library.

1. **The library.** A small offline search on gsm8k_replay (`--search-evaluations`, default
   12, on `--validation-size` problems, default 50, no held-out test) recorded in a temporary
   database; its validated front is the seed library (`seed_library_from_run`). Or
   `--library lib.json` (a file from `topology-studio library RUN --out lib.json`).
2. **The requests.** `--requests` (default 1,000) GSM8K questions drawn from every split with a
   fixed seed: `--distinct` (default 600) different questions, each asked once, then repeats of
   them drawn at random, shuffled together. Each question carries one fixed limit (a third none,
   a third a budget of `--budget-usd` per request, a third a latency limit of `--latency-ms`),
   the same on every repeat.
3. **Serving.** The same loop as `topology-studio serve-topology` (`studio.cli.library.
   serve_requests`): `LibraryDesigner` with the cache in front, the pick run by the problem's
   evaluator on the gold example, the outcome stored back. Two caches, each pre-filled with
   `--cache-entries` (default 1,000) other goals so lookups run at that size:
   `InMemoryLRU` and `MemoryStoreCache` on a `DuckDBMemoryStore` file (hashed n-gram
   embeddings, threshold 0.85).

Printed, per cache: hit rate; per-request overhead of design plus cache lookup beyond the
topology's own run (ms: mean, p50, p95; target: mean <= 5 ms at a 1,000-entry cache, PASS/FAIL),
and the cache store after the run (the online learning) with the total; served accuracy and cost against always running the library's best single topology
(its best measured accuracy) on the same requests.

Usage: `python bench/bench_runtime_design.py [--requests N] [--library lib.json]`.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("TOPOLOGY_STUDIO_DATASETS", str(REPO.parent / "shared" / "datasets"))
os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")

from core.ir.canonical import canonical_json  # noqa: E402
from core.memory import DuckDBMemoryStore  # noqa: E402
from core.problems import load_problem  # noqa: E402
from core.runtime_design import InMemoryLRU, LibraryEntry, MemoryStoreCache  # noqa: E402
from core.runtime_design.library import LibraryDesigner  # noqa: E402
from core.runtime_design.seed import load_library, seed_library_from_run  # noqa: E402
from core.storage import DuckDBRunStore  # noqa: E402
from studio.cli.library import Request, ServeReport, gold_by_question, serve_requests  # noqa: E402

TARGET_MS = 5.0


def make_library(work: Path, evaluations: int, validation_size: int) -> list[LibraryEntry]:
    """A small recorded search's validated front."""
    from studio.cli import main

    db = work / "runs.duckdb"
    os.environ["TOPOLOGY_STUDIO_CACHE"] = str(work / "cache")
    argv = [
        "search", "gsm8k_replay", "--seed", "1", "--max-evaluations", str(evaluations),
        "--set", f"gold.validation_size={validation_size}", "--time-scale", "0", "--no-test",
        "--db", str(db),
    ]  # fmt: skip
    devnull = open(os.devnull, "w")  # noqa: SIM115 (the search's report is not the bench's)
    saved = sys.stdout
    sys.stdout = devnull
    try:
        code = main(argv)
    finally:
        sys.stdout = saved
        devnull.close()
    if code != 0:
        raise SystemExit(f"the library's search failed (exit {code})")
    with DuckDBRunStore(db) as store:
        run_id = str(store.list_runs()["run_id"].iloc[0])
        return seed_library_from_run(store, run_id)


def make_requests(
    questions: list[str], n: int, distinct: int, budget: float, latency: float, seed: int
) -> list[Request]:
    rng = random.Random(seed)
    chosen = rng.sample(questions, min(distinct, len(questions), n))
    limits: dict[str, tuple[float | None, float | None]] = {}
    for i, q in enumerate(chosen):
        limits[q] = [(None, None), (budget, None), (None, latency)][i % 3]
    asked = chosen + [rng.choice(chosen) for _ in range(n - len(chosen))]
    rng.shuffle(asked)
    return [Request(i + 1, q, *limits[q]) for i, q in enumerate(asked)]


async def prefill(cache: Any, library: list[LibraryEntry], n: int) -> None:
    for i in range(n):
        spec = library[i % len(library)].spec
        await cache.store(f"warm-up request number {i} about topic {i * 7919 % 1000}", spec, True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(name: str, rep: ServeReport, library: list[LibraryEntry], wall_s: float) -> bool:
    served = rep.served
    overhead = [s.overhead_ms for s in served]
    scored = [s for s in served if s.accuracy is not None]
    acc = statistics.fmean(s.accuracy for s in scored if s.accuracy is not None)
    best_acc = statistics.fmean(s.best_accuracy for s in scored if s.best_accuracy is not None)
    cost = math.fsum(s.cost_usd for s in served if math.isfinite(s.cost_usd))
    best_cost = math.fsum(s.best_cost_usd for s in served if math.isfinite(s.best_cost_usd))
    picks: dict[str, int] = {}
    for s in served:
        key = "-" if s.entry is None else str(s.entry)
        picks[key] = picks.get(key, 0) + 1
    design = [s.design_ms for s in served]
    stores = [s.overhead_ms - s.design_ms for s in served]
    mean = statistics.fmean(design)
    ok = mean <= TARGET_MS
    print(f"== {name} ==")
    print(f"requests:        {len(served)} ({len(scored)} scored), served in {wall_s:.1f} s")
    print(f"cache hit rate:  {rep.hit_rate:.4f} ({rep.hits} of {rep.lookups})")
    print(
        f"overhead:        design + cache lookup mean {mean:.3f} ms, p50 {pct(design, 0.5):.3f} ms, "
        f"p95 {pct(design, 0.95):.3f} ms per request (target: mean <= {TARGET_MS:.0f} ms): "
        f"{'PASS' if ok else 'FAIL'}"
    )
    print(
        f"                 + cache store after the run mean {statistics.fmean(stores):.3f} ms, "
        f"p95 {pct(stores, 0.95):.3f} ms; total mean {statistics.fmean(overhead):.3f} ms"
    )
    print(
        f"served:          accuracy {acc:.4f}, cost ${cost:.2f} total "
        f"(${cost / len(served):.4f} per request)"
    )
    print(
        f"best single:     accuracy {best_acc:.4f}, cost ${best_cost:.2f} total "
        f"(${best_cost / len(served):.4f} per request; library entry {rep.best_entry})"
    )
    print(f"served/best:     cost x{cost / best_cost:.3f}, accuracy {acc - best_acc:+.4f}")
    print("picks by entry:  " + ", ".join(f"{k}: {v}" for k, v in sorted(picks.items())))
    return ok


async def serve_with(
    problem: Any, library: list[LibraryEntry], cache: Any, requests: list[Request], fill: int
) -> tuple[ServeReport, float]:
    await prefill(cache, library, fill)
    designer = LibraryDesigner(
        library, problem.callable_registry, problem.agent_registry, cache=cache
    )
    start = time.perf_counter()
    rep = await serve_requests(problem, designer, requests)
    return rep, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--distinct", type=int, default=600)
    parser.add_argument("--cache-entries", type=int, default=1000)
    parser.add_argument("--budget-usd", type=float, default=0.05)
    parser.add_argument("--latency-ms", type=float, default=3000.0)
    parser.add_argument("--library", type=Path)
    parser.add_argument("--search-evaluations", type=int, default=12)
    parser.add_argument("--validation-size", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--caches",
        default="lru,memory",
        help="comma-separated: lru, memory (DuckDB file), memory-ram (DuckDB :memory:)",
    )
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench_runtime_design_") as tmp:
        work = Path(tmp)
        start = time.perf_counter()
        library = (
            load_library(args.library)
            if args.library
            else make_library(work, args.search_evaluations, args.validation_size)
        )
        print(f"library: {len(library)} entries ({time.perf_counter() - start:.1f} s to make)")
        for i, e in enumerate(library, start=1):
            print(
                f"  {i}. {e.label or '-'}: accuracy {e.accuracy}, ${e.cost_usd} per problem, "
                f"{e.latency_ms} ms; {canonical_json(e.spec)[:90]}"
            )
        problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
        questions = list(gold_by_question(problem))
        requests = make_requests(
            questions, args.requests, args.distinct, args.budget_usd, args.latency_ms, args.seed
        )
        print(
            f"requests: {len(requests)} ({len({r.question for r in requests})} distinct; limits: "
            f"none, budget ${args.budget_usd} or latency {args.latency_ms:.0f} ms per question)"
        )
        passed = True
        for kind in args.caches.split(","):
            if kind == "lru":
                cache: Any = InMemoryLRU(args.cache_entries + args.requests)
                name = f"InMemoryLRU, {args.cache_entries} entries pre-filled"
            elif kind in ("memory", "memory-ram"):
                where = work / "memory.duckdb" if kind == "memory" else ":memory:"
                store = DuckDBMemoryStore(where)
                cache = MemoryStoreCache(store, threshold=0.85)
                name = (
                    f"MemoryStoreCache (DuckDB {'file' if kind == 'memory' else 'in memory'}), "
                    f"{args.cache_entries} entries pre-filled"
                )
            else:
                raise SystemExit(f"unknown cache {kind!r}: use lru, memory or memory-ram")
            rep, wall = asyncio.run(
                serve_with(problem, library, cache, requests, args.cache_entries)
            )
            passed = report(name, rep, library, wall) and passed
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
