"""Bench: the live page of a run with 1,000 candidates, rendered in a real browser.

Builds a run store holding one run of 1,000 evaluated candidates (with archive snapshots and a few
per-example results), starts the studio on it (`streamlit run studio/server.py` on a free port of
127.0.0.1), opens the live page in Debian's Chromium through Playwright, and prints the time from
navigation to the Pareto chart's points and the archive table being drawn. Target: under 3 s (set
when the studio was built). The first load includes the server's cold start (imports, first query);
the later ones are what a user sees when opening the page again.

Then the run overlay (several runs' validation fronts on one chart) of 10 runs of
`--overlay-candidates` candidates each (five strategies x two seeds), timed from navigation to its
two charts (10 fronts) and its tables being drawn. Target: under 3 s as well.

Each load also prints the CPU time of the page's renderer and of its main thread (DevTools'
`Performance.getMetrics`), which other processes sharing the CPUs hardly change; of the live
page's ~1.7 s on the main thread, ~0.8 s is evaluating Streamlit's Plotly.js bundle (every new
tab does it, for any figure: a chart of one point costs as much), ~0.2 s the 1,000 points.

Usage: `python bench/bench_studio.py [--candidates N] [--repeats K] [--overlay-candidates M]`.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))

from studio_harness import (  # noqa: E402  # pyright: ignore[reportMissingImports]
    chromium_missing_reason,
    launch_chromium,
    serve_studio,
)

from core.ir import parse_topology, spec_hash  # noqa: E402
from core.search.events import (  # noqa: E402
    ArchiveSnapshot,
    CandidateEvaluated,
    CandidateProposed,
    ExampleEvaluated,
    RunFinished,
    RunStarted,
    SearchEvent,
)
from core.storage import DuckDBRunStore  # noqa: E402

RUN_ID = "bench-1000"
AGENTS = ("6b_finetuning", "175b_finetuning", "6b_verification", "175b_verification")
TARGET_S = 3.0
OVERLAY_RUNS = tuple(f"bench-overlay-{k:02d}" for k in range(10))


def build_events(
    n: int, run_id: str = RUN_ID, *, strategy: str = "evolutionary", seed: int = 1
) -> list[SearchEvent]:
    """One finished run of `n` candidates: varied specs and objectives, a snapshot every 50
    (`seed` shifts the objectives, so overlaid runs differ)."""
    t0 = 1_735_732_800.0
    seq = 0
    out: list[SearchEvent] = []

    def add(event: SearchEvent) -> None:
        nonlocal seq
        out.append(event)
        seq += 1

    add(
        RunStarted(
            run_id=run_id, seq=seq, ts=t0, problem="gsm8k_replay", strategy=strategy, seed=seed
        )
    )
    front: list[int] = []
    for i in range(n):
        steps = ", ".join(
            f'{{"operation": {{"kind": "agent_step", "agent_name": "{AGENTS[(i // 4**k) % 4]}"}}}}'
            for k in range(1 + i % 4)
        )
        text = f'{{"kind": "pipeline", "name": "c{i}", "steps": [{steps}]}}'
        h = spec_hash(parse_topology(text))
        add(
            CandidateProposed(
                run_id=run_id, seq=seq, ts=t0 + i, candidate_idx=i, generation=i // 10 - 1,
                spec_hash=h, spec_json=text, parent_idx=None if i == 0 else (i * 7) % i,
                operator="seed" if i == 0 else "mutate:insert_step",
                thought=f"candidate {i}: try {AGENTS[i % 4]}",
            )
        )  # fmt: skip
        if i % 100 == 0:
            for e in range(5):
                add(
                    ExampleEvaluated(
                        run_id=run_id, seq=seq, ts=t0 + i, candidate_idx=i, spec_hash=h,
                        split="validation", example_id=f"q{e}", accuracy=float(e % 2),
                    )
                )  # fmt: skip
        acc = 0.2 + 0.6 * ((i * 37 + seed * 11) % 101) / 100
        cost = 0.0005 * (1 + (i * 53 + seed * 7) % 997)
        add(
            CandidateEvaluated(
                run_id=run_id, seq=seq, ts=t0 + i + 0.5, candidate_idx=i, spec_hash=h,
                split="validation" if i % 5 == 0 else "minibatch", n_examples=20, accuracy=acc,
                cost_usd=cost, latency_ms=800.0 + (i * 31) % 5000, n_agents=1 + i % 4,
                depth=1, aggregate_score=acc - 10 * cost, valid=i % 97 != 13,
                invalid_reason=None if i % 97 != 13 else "degenerate: test",
            )
        )  # fmt: skip
        if i % 50 == 49:
            front = sorted(set(front + [i]))[-20:]
            add(
                ArchiveSnapshot(
                    run_id=run_id, seq=seq, ts=t0 + i + 0.9, generation=i // 50,
                    entries=list(range(i + 1))[-5:], front=front, best_idx=i,
                    best_score=0.5 + i / (4 * n), hypervolume=math.log1p(i) / 10,
                    n_evaluations=20 * (i + 1), cost_usd_total=0.01 * i,
                )
            )  # fmt: skip
    add(RunFinished(run_id=run_id, seq=seq, ts=t0 + n + 1, status="completed", reason="bench"))
    return out


def _tree_cpu_s(root: int) -> dict[int, float]:
    """CPU seconds (user + system) used so far by each descendant of process `root` (by pid):
    the studio server, Playwright's driver and Chromium. Linux only (reads /proc); empty
    elsewhere. `_cpu_since` turns two of these into the CPU a load cost.

    Wall time on a busy shared machine says little; the CPU a page load costs tells what an
    idle machine would take."""
    proc = Path("/proc")
    if not proc.is_dir():
        return {}
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        pid, ppid = int(d.name), int(fields[1])
        children.setdefault(ppid, []).append(pid)
        ticks[pid] = int(fields[11]) + int(fields[12])
    out: dict[int, float] = {}
    stack = list(children.get(root, []))
    while stack:
        pid = stack.pop()
        out[pid] = ticks.get(pid, 0) / os.sysconf("SC_CLK_TCK")
        stack.extend(children.get(pid, []))
    return out


def _cpu_since(before: dict[int, float]) -> float:
    """The CPU used since `before` (a `_tree_cpu_s`) by the processes alive now: a new one
    all of its time, an old one its growth. A process that ended in between (the previous
    tab's renderer, closing) counts nothing: a difference of two totals would take its whole
    CPU off this load's and swing by seconds either way. NaN off Linux."""
    now = _tree_cpu_s(os.getpid())
    if not now:
        return math.nan
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in now.items())


def _renderer_cpu_s(cdp: Any) -> tuple[float, float]:
    """CPU seconds of the page's renderer so far: its main thread (where Streamlit, Plotly and
    the data grid run), then the whole renderer process (with raster and compositor threads),
    from the DevTools protocol's `Performance.getMetrics` (`ThreadTime`, `ProcessTime`).

    Unlike wall time, these hardly move when other processes share the CPUs."""
    metrics = {m["name"]: float(m["value"]) for m in cdp.send("Performance.getMetrics")["metrics"]}
    return metrics.get("ThreadTime", math.nan), metrics.get("ProcessTime", math.nan)


def main() -> None:
    parser = argparse.ArgumentParser(description="The live page of a large run, in Chromium.")
    parser.add_argument("--candidates", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--overlay-candidates", type=int, default=200)
    args = parser.parse_args()
    missing = chromium_missing_reason()
    if missing:
        raise SystemExit(f"bench_studio: {missing}")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.duckdb"
        t = time.perf_counter()
        with DuckDBRunStore(db) as store:
            store.record_events(build_events(args.candidates))
            n = len(store.archive(RUN_ID))
            for k, rid in enumerate(OVERLAY_RUNS):
                store.record_events(
                    build_events(
                        args.overlay_candidates,
                        rid,
                        strategy=("evolutionary", "random", "meta_agent", "grid", "hill")[k % 5],
                        seed=1 + k // 5,
                    )
                )
        print(
            f"store: {n} candidates and {len(OVERLAY_RUNS)} runs of {args.overlay_candidates} "
            f"recorded in {time.perf_counter() - t:.2f} s"
        )
        with serve_studio(db) as url, sync_playwright() as p:
            browser = launch_chromium(p)
            # one browser profile, a new tab per load: load 1 has cold caches (server and
            # browser), later loads are a user opening the page again
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            timings: list[float] = []
            cpus: list[float] = []
            mains: list[float] = []
            for k in range(args.repeats):
                page = context.new_page()
                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")
                cpu0 = _tree_cpu_s(os.getpid())
                start = time.perf_counter()
                page.goto(f"{url}/live?run={RUN_ID}")
                page.wait_for_function(
                    "() => document.querySelectorAll("
                    "'.js-plotly-plot .scatterlayer .points path').length >= 100",
                    timeout=120_000,
                )
                page.locator('[data-testid="stDataFrame"] canvas').first.wait_for(timeout=120_000)
                elapsed = time.perf_counter() - start
                cpu = _cpu_since(cpu0)
                main_cpu, renderer_cpu = _renderer_cpu_s(cdp)
                timings.append(elapsed)
                cpus.append(cpu)
                mains.append(main_cpu)
                drawn = page.evaluate(
                    "() => document.querySelectorAll("
                    "'.js-plotly-plot .scatterlayer .points path').length"
                )
                label = "cold: first load after start" if k == 0 else "warm: opened again"
                print(
                    f"load {k + 1} ({label}): chart ({drawn} points) and table in {elapsed:.2f} s "
                    f"(CPU {cpu:.2f} s: server + browser; the page's renderer {renderer_cpu:.2f} s, "
                    f"its main thread {main_cpu:.2f} s)"
                )
                page.close()
            ov_timings: list[float] = []
            ov_cpus: list[float] = []
            ov_mains: list[float] = []
            for k in range(args.repeats):
                page = context.new_page()
                cdp = context.new_cdp_session(page)
                cdp.send("Performance.enable")
                cpu0 = _tree_cpu_s(os.getpid())
                start = time.perf_counter()
                page.goto(f"{url}/overlay?runs={','.join(OVERLAY_RUNS)}")
                page.wait_for_function(
                    "() => { const g = document.querySelectorAll('.js-plotly-plot');"
                    " return g.length >= 2 && g[0]._fullData && g[0]._fullData.length >= 10"
                    " && g[0].querySelectorAll('.scatterlayer .trace').length >= 10; }",
                    timeout=120_000,
                )
                page.locator('[data-testid="stDataFrame"] canvas').nth(1).wait_for(timeout=120_000)
                elapsed = time.perf_counter() - start
                cpu = _cpu_since(cpu0)
                main_cpu, renderer_cpu = _renderer_cpu_s(cdp)
                ov_timings.append(elapsed)
                ov_cpus.append(cpu)
                ov_mains.append(main_cpu)
                label = "cold: first load" if k == 0 else "warm: opened again"
                print(
                    f"overlay load {k + 1} ({label}): 10 runs, both charts and tables in "
                    f"{elapsed:.2f} s (CPU {cpu:.2f} s: server + browser; the page's renderer "
                    f"{renderer_cpu:.2f} s, its main thread {main_cpu:.2f} s)"
                )
                page.close()
            context.close()
            browser.close()
    ov_warm = ov_timings[1:] or ov_timings
    ov_verdict = "OK" if statistics.median(ov_warm) < TARGET_S else "OVER TARGET"
    print(
        f"run overlay, {len(OVERLAY_RUNS)} runs of {args.overlay_candidates} candidates: median "
        f"{statistics.median(ov_warm):.2f} s (warm), first {ov_timings[0]:.2f} s; target < "
        f"{TARGET_S:g} s: {ov_verdict}; CPU per warm load {statistics.median(ov_cpus[1:] or ov_cpus):.2f} s, "
        f"the renderer's main thread {statistics.median(ov_mains[1:] or ov_mains):.2f} s"
    )
    warm = timings[1:] or timings
    warm_cpu = cpus[1:] or cpus
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    verdict = "OK" if statistics.median(warm) < TARGET_S else "OVER TARGET"
    print(
        f"live page, {args.candidates} candidates: median {statistics.median(warm):.2f} s "
        f"(warm), first {timings[0]:.2f} s; target < {TARGET_S:g} s: {verdict} "
        f"(1-minute load average {load:.1f} on {os.cpu_count()} CPUs)"
    )
    med_cpu = statistics.median(warm_cpu)
    print(
        f"CPU per warm load (server + browser): median {med_cpu:.2f} s, so on an idle "
        f"{os.cpu_count()}-CPU machine a load needs about {med_cpu / (os.cpu_count() or 1):.2f}"
        f"-{med_cpu:.2f} s of wall time besides waiting (the wall figure above also has the "
        "other processes' share of the CPUs)"
    )
    print(
        f"the page's renderer main thread per warm load: median "
        f"{statistics.median(mains[1:] or mains):.2f} s of CPU (DevTools' ThreadTime: barely "
        "moved by other load; a load takes at least that long)"
    )


if __name__ == "__main__":
    main()
