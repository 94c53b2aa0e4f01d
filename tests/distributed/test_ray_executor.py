"""`RayExecutor` on a local Ray instance the module starts (127.0.0.1, 2 CPUs, no dashboard)
and shuts down after. Skipped only when `ray` is not importable; CI installs the
extra (`.ci/run`), so there they run."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install -e '.[ray]')")

from core.agents.rate_budget import ProviderLimit  # noqa: E402
from core.distributed.ray_executor import RayExecutor  # noqa: E402
from core.evaluation.executor import LocalExecutor  # noqa: E402
from core.problems import load_problem  # noqa: E402
from core.search.engine import build_search  # noqa: E402

SLEEPY = Path(__file__).resolve().parents[1] / "fixtures" / "sleepy"
SLOW = {"params.delay_s": 0.1}

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[None]:
    ray.init(
        address="local",
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        object_store_memory=80 * 1024 * 1024,
        log_to_driver=False,
    )
    try:
        yield
    finally:
        ray.shutdown()


def _search(executor: Any, overrides: dict[str, Any] | None = None) -> tuple[Any, Any]:
    problem = load_problem(SLEEPY, overrides=overrides or {})
    started: list[Any] = []
    search = build_search(
        problem,
        "evolutionary",
        seed=7,
        handle_sigint=False,
        subscribers=[lambda e: started.append(e) if type(e).__name__ == "RunStarted" else None],
        executor=executor,
    )
    result = asyncio.run(search.run())
    assert [e.config["executor"] for e in started] == [executor.describe()]
    raw = result.raw
    archive = [
        (e.spec_hash, e.split, e.aggregate_score, tuple(e.bundles)) for e in raw.archive.entries
    ]
    return archive, (raw["pareto_idx"], result.best_score, result.best_candidate)


def _examples_recorded_once(executor: RayExecutor, overrides: dict[str, Any]) -> Any:
    """A search whose every result the test counts by (candidate, split, example, trial)."""
    problem = load_problem(SLEEPY, overrides=overrides)
    seen: dict[tuple[str, str, str, int], int] = {}
    search = build_search(problem, "evolutionary", seed=7, handle_sigint=False, executor=executor)
    evaluate = search.evaluator.evaluate

    async def counting(spec: Any, examples: Any, **kw: Any) -> Any:
        outer = kw.pop("on_example", None)

        def on_example(r: Any) -> None:
            if not r.cached:
                k = (r.spec_hash, r.split, r.example_id, r.trial)
                seen[k] = seen.get(k, 0) + 1
            if outer is not None:
                outer(r)

        return await evaluate(spec, examples, on_example=on_example, **kw)

    search.evaluator.evaluate = counting  # type: ignore[method-assign]
    result = asyncio.run(search.run())
    return result, seen


def test_same_seed_same_archive_and_front_local_and_ray(ray_instance: None) -> None:
    local = _search(LocalExecutor())
    executor = RayExecutor(SLEEPY, num_workers=2)
    try:
        remote = _search(executor)
        health = executor.health()
    finally:
        executor.close()
    assert remote == local
    assert [h.state for h in health] == ["alive", "alive"]
    assert sum(h.runs for h in health) > 0


def test_worker_killed_mid_run_same_front_every_example_once(ray_instance: None) -> None:
    _, local_front = _search(LocalExecutor(), SLOW)
    executor = RayExecutor(SLEEPY, overrides=SLOW, num_workers=2, batches_per_worker=1)
    executor.start()
    victim = executor.worker_pids()[0]
    timer = threading.Timer(0.8, os.kill, (victim, signal.SIGKILL))
    timer.start()
    try:
        result, seen = _examples_recorded_once(executor, SLOW)
        restarts = sum(h.restarts for h in executor.health())
    finally:
        timer.cancel()
        executor.close()
    raw = result.raw
    assert (raw["pareto_idx"], result.best_score, result.best_candidate) == local_front
    assert seen and set(seen.values()) == {1}
    assert restarts == 1


def test_rate_budget_holds_across_two_workers(ray_instance: None) -> None:
    # 240 requests a minute (4 a second), at most 2 at once in a burst: over any window of w
    # seconds at most 2 + 4 w calls are granted, whichever worker asks
    limits = {"function": ProviderLimit(requests_per_minute=240, burst_s=0.5)}
    executor = RayExecutor(SLEEPY, num_workers=2, rate_limits=limits)
    problem = load_problem(SLEEPY)
    evaluator = problem.evaluator(executor=executor)
    try:
        ev = asyncio.run(evaluator.evaluate(problem.seed_spec, problem.splits["validation"]))
        report = executor.budget_report()
        workers = [h.runs for h in executor.health()]
    finally:
        executor.close()
    times = sorted(report["grant_times"]["function"])
    assert len(times) == ev.n_model_requests == report["granted"]["function"]
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            w = times[j] - start
            assert j - i + 1 <= 2 + 4 * w + 1e-9
    assert report["in_flight"] == {"function": 0}
    assert all(n > 0 for n in workers)


def test_call_cache_is_shared_by_workers_and_seeded_from_the_driver(ray_instance: None) -> None:
    from core.agents.call_cache import InMemoryCallCache
    from core.evaluation.example_memo import MEMO_PREFIX

    problem = load_problem(SLEEPY)
    examples = problem.splits["validation"]
    cache = InMemoryCallCache()
    first = RayExecutor(SLEEPY, num_workers=2)
    evaluator = problem.evaluator(call_cache=cache, executor=first)
    try:
        asyncio.run(evaluator.evaluate(problem.seed_spec, examples))
        made = cache.stats()
        asyncio.run(evaluator.evaluate(problem.seed_spec, examples))  # no evaluation cache
        again = cache.stats()
    finally:
        first.close()
    # the driver holds every call the workers made, and each example's memo (its answered
    # calls, `core.evaluation.example_memo`); run again, every call is a hit
    memos = [k for k, _ in cache.records() if k.startswith(MEMO_PREFIX)]
    assert (made.hits, made.misses, len(cache) - len(memos), len(memos)) == (0, 8, 8, 8)
    assert (again.hits - made.hits, again.misses - made.misses) == (8, 0)
    # a new executor's cache actor is seeded from the driver's cache: still no model call
    second = RayExecutor(SLEEPY, num_workers=2)
    evaluator = evaluator.with_collaborators(executor=second)
    try:
        asyncio.run(evaluator.evaluate(problem.seed_spec, examples))
    finally:
        second.close()
    assert cache.stats().misses == 8


def test_a_busy_worker_answers_its_ping_with_its_runs_in_flight(ray_instance: None) -> None:
    # a worker runs a batch in one thread and answers pings in another: busy reads as alive
    # (with what it holds), not as unreachable after PING_TIMEOUT_S
    slow = {"params.delay_s": 1.0}
    executor = RayExecutor(SLEEPY, overrides=slow, num_workers=2, batches_per_worker=1)
    executor.start()
    problem = load_problem(SLEEPY, overrides=slow)
    evaluator = problem.evaluator(executor=executor)
    runner = threading.Thread(
        target=lambda: asyncio.run(
            evaluator.evaluate(problem.seed_spec, problem.splits["validation"])
        )
    )
    runner.start()
    try:
        busy: list[Any] = []
        deadline = time.monotonic() + 30
        while not busy and time.monotonic() < deadline:
            began = time.monotonic()
            health = executor.health()
            took = time.monotonic() - began
            busy = [h for h in health if h.in_flight > 0]
        runner.join()
        after = executor.health()
    finally:
        executor.close()
    assert busy, "no batch seen in flight"
    assert took < 1.0
    assert {h.state for h in health} == {"alive"}
    assert sum(h.in_flight for h in busy) == 8  # the 8 validation examples, both batches out
    assert [h.in_flight for h in after] == [0, 0]
    assert sum(h.runs for h in after) == 8
    assert all(h.last_seen is not None for h in after)


def test_a_search_on_ray_records_its_workers_health_for_the_runs_page(
    ray_instance: None, tmp_path: Path
) -> None:
    from core.storage import DuckDBRunStore, journal_dir
    from core.storage.health import read_health
    from studio.cli import main

    db = tmp_path / "runs.duckdb"
    code = main(
        ["search", str(SLEEPY), "--executor", "ray", "--max-evaluations", "3", "--no-test"]
        + ["--db", str(db), "--no-call-cache", "--seed", "7"]
    )
    assert code == 0
    [journal] = journal_dir(db).glob("*.jsonl")
    run_id = journal.stem
    n = int(ray.cluster_resources()["CPU"])
    assert n == 2
    where = "ray: 2 workers, local 127.0.0.1"  # the workers started before the run
    with DuckDBRunStore(db) as store:
        record = store.get_run(run_id)
        runs = store.list_runs()
    assert record is not None and record.config["executor"] == where
    assert runs["executor"].tolist() == [where]
    snap = read_health(db, run_id)
    assert snap is not None
    assert (snap.run_id, snap.executor, len(snap.workers)) == (run_id, where, 2)
    assert [w.name for w in snap.workers] == ["worker-0", "worker-1"]
    assert {w.state for w in snap.workers} == {"alive"}
    # one node (its address as the worker sees it: the machine's, not necessarily 127.0.0.1)
    assert len({w.node for w in snap.workers}) == 1 and None not in {w.node for w in snap.workers}
    assert sum(w.in_flight for w in snap.workers) == 0  # the last one, after the run
    assert sum(w.runs for w in snap.workers) > 0


def test_a_search_started_in_the_studio_on_ray_records_its_executor_and_health(
    ray_instance: None, tmp_path: Path
) -> None:
    from core.storage.health import read_health
    from studio.manager import SearchRequest, StudioManager

    manager = StudioManager(tmp_path / "runs.duckdb", registry_root=tmp_path / "reg")
    try:
        run_id = manager.start_search(
            SearchRequest(
                problem=str(SLEEPY), executor="ray", max_evaluations=3, use_test_split=False
            )
        )
        bg = manager.search(run_id)
        assert bg is not None
        deadline = time.monotonic() + 300
        while bg.alive and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (bg.state, bg.error) == ("stopped", "")  # max_evaluations reached
        record = manager.store.get_run(run_id)
        snap = manager.worker_health(run_id)
    finally:
        manager.close()
    where = "ray: 2 workers, local 127.0.0.1"
    assert record is not None and record.config["executor"] == where
    assert snap is not None and snap == read_health(tmp_path / "runs.duckdb", run_id)
    assert (snap.executor, len(snap.workers)) == (where, 2)
    assert {w.state for w in snap.workers} == {"alive"}


def test_a_ray_sweeps_searches_share_one_rate_budget(ray_instance: None, tmp_path: Path) -> None:
    """Two searches of one sweep at once, under the problem's `[rate_limits.function]` of 600
    requests a minute with a 0.2 s burst (10 a second, at most 2 at once): every call made by
    either search's worker is logged by the model, and over any window of w seconds the two
    together made at most 2 + 10 (w + 0.25) calls (0.25 s: the time from a grant to the
    model's log line may differ between calls). Each search with a budget of its own would
    make about 20 a second."""
    import json
    import shutil

    from studio.cli import main
    from studio.cli.sweep import sweep_dir

    problem = tmp_path / "sleepy"
    shutil.copytree(SLEEPY, problem)
    log = tmp_path / "calls.log"
    toml = (problem / "problem.toml").read_text().replace('call_log = ""', f'call_log = "{log}"')
    toml += "\n[rate_limits.function]\nrequests_per_minute = 600\nburst_s = 0.2\n"
    (problem / "problem.toml").write_text(toml)
    db = tmp_path / "runs.duckdb"
    argv = ["sweep", str(problem), "--db", str(db), "--strategies", "evolutionary,random"]
    argv += ["--seeds", "1", "--name", "g", "--max-evaluations", "6", "--no-test"]
    assert main([*argv, "--executor", "ray", "--parallel", "2"]) == 0
    group = json.loads((sweep_dir(db) / "g.json").read_text())
    assert len(group["runs"]) == 2
    assert group["rate_budget"] == "shared actor"
    assert group["rate_limits"] == {
        "function": {
            "requests_per_minute": 600.0,
            "tokens_per_minute": None,
            "max_concurrent": None,
            "burst_s": 0.2,
        }
    }
    times = sorted(float(t) for t in log.read_text().split())
    # a granted call a `fastest` merge cancels may never reach the model: granted >= logged
    assert 30 <= len(times) <= group["calls_granted"]["function"]
    for i, start in enumerate(times):
        for j in range(i, len(times)):
            assert j - i + 1 <= 2 + 10 * (times[j] - start + 0.25)
    assert ray.is_initialized()  # the sweep used the test's Ray and left it running
