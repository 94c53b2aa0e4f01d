"""`topology-studio sweep PROBLEM --strategies a,b --seeds 1-5`: searches run concurrently, one
named group.

Each (strategy, seed) is a normal `topology-studio search` run in its own process (so each is
recorded in the store exactly as a search typed by hand), `--parallel` at a time, with the run
id the sweep chose for it (`search --run-id`, so the sweep names each run as it starts).
`--executor`, `--ray-address`, `--ray-workers` and `--rate-limit` are passed on.

**One rate budget for the whole sweep**. The limits are the problem's
`[rate_limits.<provider>]` with the `--rate-limit`s over them (`effective_rate_limits`:
requests per minute, tokens per minute, calls in flight).

- `--executor ray`: the sweep connects to the cluster (`--ray-address`) or starts one private local
  Ray instance for all its searches (not one each), creates one named budget actor
  (`core.distributed.ray_executor.create_budget_actor`, named `sweep-<name>-<run id of the
  first search>`) and passes its name and the cluster's address to every search: every worker
  of every search draws from that one actor, so the sweep as a whole stays within the limits.
  The actor lives as long as the sweep (it is killed when the sweep ends); each search gets an
  equal part of the cluster's CPUs as workers unless `--ray-workers` says otherwise.
- `--executor local` (the default): the searches are separate processes, and an in-process
  `RateBudget` cannot be shared between processes without a budget server of its own. So each
  of the `min(--parallel, searches)` searches that may run at once gets an equal part of every
  limit (`share_rate_limits`: requests and tokens per minute divided by that number, calls in
  flight divided and rounded down): their sum never exceeds the limits. The price is capacity
  left unused while fewer searches run (the last ones of a sweep) or when one search calls
  less than its part; use `--executor ray` for one budget that any search may draw on in full.
  A limit of fewer calls in flight than searches at once is refused (lower `--parallel`).

**Progress.** A line as each search starts (`started RUN strategy seed N`) and as it ends
(`ended RUN strategy seed N STATUS best SCORE wall Ws`, read from the run's journal), then a
table of every search. **Ctrl-C** (the searches run in their own process group, so the sweep
alone gets the terminal's signal and forwards it): the first stops starting new searches and
asks each running one to stop after its evaluation in progress, as `search` does on its first
Ctrl-C; each then records itself and the sweep prints their end lines, the table (a search
never started says `not started`), and last the resume command of each interrupted run
(`interrupted: continue with '...'`, one line each), then exits 130. A second Ctrl-C stops the
running searches at once (forwarded again) and prints only `error: interrupted` and the resume
commands on one line.

The group is a JSON file in `<db>.sweeps/<name>.json` (`name`, `problem`, `strategies`,
`seeds`, `runs`: the run ids of the searches that recorded a run, in (strategy, seed) order;
`rate_limits`: the sweep's effective limits; `rate_budget`: `"shared actor"`, `"split N
ways"` or `"none"`), and the command prints the studio's Run overlay link that opens every run
of the group at once (`/overlay?runs=ID,ID,...`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.agents.rate_budget import ProviderLimit
from core.errors import StoreError
from core.problems import load_problem
from core.storage.journal import journal_path, new_run_id, read_journal
from core.vocab.events import CandidateEvaluated, RunFinished
from studio.cli._common import CliInterrupted, CliUsageError, ExitCode, resolve_db_path
from studio.cli._executor import effective_rate_limits, share_rate_limits
from studio.cli._output import Output, fmt_float
from studio.cli.studio import child_signals

__all__ = ["cmd_sweep", "parse_seeds", "sweep_dir", "sweep_groups"]

POLL_S = 0.05
"""How often the sweep looks at its running searches, seconds."""


def parse_seeds(text: str) -> list[int]:
    """`"1-5"` -> [1, 2, 3, 4, 5]; `"1,3,7"` -> [1, 3, 7]; the two forms may be mixed.

    Raises:
        CliUsageError: not such a list, or an empty range.
    """
    seeds: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if m is None:
            raise CliUsageError(f"--seeds: expected e.g. 1-5 or 1,3,7, not {text!r}")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise CliUsageError(f"--seeds: empty range {part.strip()!r}")
        seeds += [s for s in range(lo, hi + 1) if s not in seeds]
    return seeds


def sweep_dir(db: Path) -> Path:
    """`<db>.sweeps/`: where the groups of the run store at `db` are kept."""
    return db.with_name(db.name + ".sweeps")


@dataclass
class _Job:
    """One search of the sweep, from its start to its end."""

    strategy: str
    seed: int
    run_id: str
    proc: subprocess.Popen[bytes] | None = None
    began: float = 0.0
    wall_s: float | None = None
    code: int | None = None
    status: str = "not started"
    best: float | None = None
    recorded: bool = False
    """A run was recorded (its journal ends with `RunFinished`)."""
    err: str = ""
    files: list[Path] = field(default_factory=lambda: [])


def _limit_text(limit: ProviderLimit) -> str:
    parts = (limit.requests_per_minute, limit.tokens_per_minute, limit.max_concurrent)
    return ":".join("" if v is None else f"{v:g}" for v in parts)


def _outcome(job: _Job, db: Path) -> None:
    """Fill `job`'s status and best score from its journal (`RunFinished`: status and reason;
    the best candidate's last full-validation `aggregate_score`)."""
    try:
        events = read_journal(journal_path(db, job.run_id))
    except (OSError, StoreError):  # no journal (the search failed before it ran), or damaged
        events = []
    finished = [e for e in events if isinstance(e, RunFinished)]
    if finished:
        last = finished[-1]
        job.recorded = True
        job.status = last.status + (f" ({last.reason})" if last.reason else "")
        scores = [
            e.aggregate_score
            for e in events
            if isinstance(e, CandidateEvaluated)
            and e.candidate_idx == last.best_idx
            and e.split == "validation"
        ]
        job.best = scores[-1] if scores else None
    elif job.code == ExitCode.INTERRUPTED:
        job.status = "interrupted"
    else:
        job.status = f"failed (exit {job.code})"


class _Sigints:
    """Counts SIGINTs while installed (main thread only), instead of raising
    `KeyboardInterrupt` in the middle of the sweep's bookkeeping."""

    def __init__(self) -> None:
        self.count = 0
        self._previous: Any = None

    def __enter__(self) -> _Sigints:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum: int, frame: object) -> None:
        self.count += 1

    def __exit__(self, *exc: object) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)


class _RayBudget:
    """With `--executor ray`: one Ray cluster and one named budget actor for the sweep."""

    def __init__(self, address: str | None, limits: dict[str, ProviderLimit], name: str) -> None:
        try:
            from core.distributed import ray_executor
        except ImportError as exc:
            raise CliUsageError(str(exc)) from None
        self._rx = ray_executor
        self._started = ray_executor.init_ray(address)
        self.address = ray_executor.cluster_address()
        self.cpus = int(ray_executor.ray.cluster_resources().get("CPU", 1))
        self.name = name if limits else None
        self._actor = ray_executor.create_budget_actor(name, limits) if limits else None

    def granted(self) -> dict[str, int]:
        if self._actor is None:
            return {}
        return dict(self._rx.budget_actor_report(self._actor)["granted"])

    def close(self) -> None:
        ray = self._rx.ray
        if self._actor is not None:
            with contextlib.suppress(Exception):
                ray.kill(self._actor, no_restart=True)
            self._actor = None
        if self._started:
            ray.shutdown()
            self._started = False


def cmd_sweep(args: argparse.Namespace, out: Output) -> int:
    """Run the sweep (see the module docstring); exit 0 when every search succeeded, 130 after
    Ctrl-C, 1 when a search failed."""
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if not strategies:
        raise CliUsageError("--strategies: name at least one strategy")
    seeds = parse_seeds(args.seeds)
    db = resolve_db_path(args.db)
    name = args.name or f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name):
        raise CliUsageError(f"--name: letters, digits, '.', '_' and '-' only, not {name!r}")
    problem = load_problem(args.problem)  # its [rate_limits]; a bad problem fails once, here
    limits = effective_rate_limits(problem, args)
    jobs = [_Job(s, n, new_run_id()) for s in strategies for n in seeds]
    at_once = max(1, min(args.parallel, len(jobs)))
    common = ["--db", str(db), "--executor", args.executor]
    common += [f"--rate-limit={p}={_limit_text(v)}" for p, v in getattr(args, "rate_limit", [])]
    if args.max_evaluations is not None:
        common += ["--max-evaluations", str(args.max_evaluations)]
    if args.no_test:
        common.append("--no-test")
    ray_budget: _RayBudget | None = None
    if args.executor == "ray":
        ray_budget = _RayBudget(args.ray_address, limits, f"sweep-{name}-{jobs[0].run_id}")
        common += ["--ray-address", ray_budget.address]
        workers = args.ray_workers or max(1, ray_budget.cpus // at_once)
        common += ["--ray-workers", str(workers)]
        if ray_budget.name is not None:
            common += ["--rate-budget-actor", ray_budget.name]
        how = "shared actor" if limits else "none"
    elif args.ray_address or args.ray_workers:
        raise CliUsageError("--ray-address and --ray-workers need --executor ray")
    else:
        share_rate_limits(limits, at_once)  # refused here, not by each search
        if limits and at_once > 1:
            common += ["--rate-share", str(at_once)]
        how = "none" if not limits else f"split {at_once} ways" if at_once > 1 else "whole"
    try:
        with tempfile.TemporaryDirectory(prefix="sweep-") as tmp, _Sigints() as sigints:
            _run_jobs(jobs, args, common, at_once, db, Path(tmp), sigints, out)
            granted = ray_budget.granted() if ray_budget is not None else {}
    finally:
        if ray_budget is not None:
            ray_budget.close()
    group: dict[str, Any] = {
        "name": name,
        "problem": args.problem,
        "strategies": strategies,
        "seeds": seeds,
        "rate_limits": {p: v.model_dump(mode="json") for p, v in limits.items()},
        "rate_budget": how,
    }
    if granted:
        group["calls_granted"] = granted
    return _finish(jobs, group, db, sigints.count, out)


def _run_jobs(
    jobs: list[_Job],
    args: argparse.Namespace,
    common: list[str],
    at_once: int,
    db: Path,
    tmp: Path,
    sigints: _Sigints,
    out: Output,
) -> None:
    """Start the searches `at_once` at a time, print each start and end, forward Ctrl-C."""
    pending = list(reversed(jobs))
    running: list[_Job] = []
    seen = 0
    while pending or running:
        if sigints.count > seen:  # forward each Ctrl-C once to every running search
            if seen == 0:
                out.note(
                    "interrupted: each running search stops after its evaluation in progress; "
                    "no new search starts (Ctrl-C again stops them at once)"
                )
            seen = sigints.count
            for job in running:
                if job.proc is not None:
                    with contextlib.suppress(ProcessLookupError):
                        job.proc.send_signal(signal.SIGINT)
        while pending and len(running) < at_once and not sigints.count:
            job = pending.pop()
            argv = [sys.executable, "-m", "studio.cli", "search", args.problem]
            argv += ["--strategy", job.strategy, "--seed", str(job.seed), "--run-id", job.run_id]
            job.files = [tmp / f"{job.run_id}.out", tmp / f"{job.run_id}.err"]
            with job.files[0].open("wb") as so, job.files[1].open("wb") as se:
                job.proc = subprocess.Popen(  # noqa: S603 (our own command line)
                    [*argv, *common],
                    stdout=so,
                    stderr=se,
                    stdin=subprocess.DEVNULL,
                    process_group=0,
                    preexec_fn=child_signals,
                )
            job.began = time.monotonic()
            running.append(job)
            out.line(f"started {job.run_id}  {job.strategy} seed {job.seed}")
        for job in list(running):
            assert job.proc is not None
            code = job.proc.poll()
            if code is None:
                continue
            running.remove(job)
            job.code, job.wall_s = code, time.monotonic() - job.began
            _outcome(job, db)
            if not job.recorded:
                lines = job.files[1].read_text(errors="replace").strip().splitlines()
                job.err = lines[-1] if lines else ""
            best = fmt_float(job.best, 4) if job.best is not None else "-"
            line = f"ended   {job.run_id}  {job.strategy} seed {job.seed}  {job.status}"
            out.line(f"{line}  best {best}  wall {job.wall_s:.1f} s")
            if job.err:
                out.error(f"{job.strategy} seed {job.seed}: {job.err}")
        if running:
            time.sleep(POLL_S)
        elif sigints.count:
            break  # interrupted: the searches not started stay so


def _finish(jobs: list[_Job], group: dict[str, Any], db: Path, sigints: int, out: Output) -> int:
    """Print the table, write the group (with the recorded runs), and say what comes next."""
    rows = [
        [
            j.run_id,
            j.strategy,
            str(j.seed),
            j.status,
            fmt_float(j.best, 4) if j.best is not None else "-",
            "-" if j.wall_s is None else f"{j.wall_s:.1f}",
        ]
        for j in jobs
    ]
    if sigints < 2:
        out.table(
            ("run", "strategy", "seed", "status", "best", "wall_s"), rows, right=("seed", "best")
        )
    runs = [j.run_id for j in jobs if j.recorded]
    name, problem = group["name"], group["problem"]
    group = {**group, "runs": runs}
    folder = sweep_dir(db)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(group, indent=2) + "\n")
    stopped = [j for j in jobs if "SIGINT" in j.status or j.status == "interrupted"]
    resume = [f"topology-studio search {problem} --resume {j.run_id} --db {db}" for j in stopped]
    hints = [f"interrupted: continue with '{line}'" for line in resume]
    if sigints >= 2:
        raise CliInterrupted("; ".join(hints) or f"interrupted: the recorded runs are in {db}")
    out.line(f"sweep {name}: {len(runs)} runs recorded in {db}")
    out.line(f"overlay: open the studio's Run overlay page at /overlay?runs={','.join(runs)}")
    if sigints:
        for hint in hints:  # the last lines, as `search` ends with its resume command
            out.note(hint)
        return ExitCode.INTERRUPTED
    failed = any(j.code != 0 or not j.recorded for j in jobs)
    return ExitCode.FAILED if failed else ExitCode.OK


def sweep_groups(db: Path) -> list[dict[str, object]]:
    """The sweep groups of the run store at `db`, newest file first: each the group's JSON
    (`name`, `problem`, `strategies`, `seeds`, `runs`). A file that is not such a group is
    skipped (the studio's Run overlay page lists these)."""
    folder = sweep_dir(db)
    if not folder.is_dir():
        return []
    out: list[dict[str, object]] = []
    files = sorted(folder.glob("*.json"), key=lambda f: f.stat().st_mtime, reverse=True)
    for path in files:
        try:
            group = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(group, dict) and isinstance(group.get("runs"), list):
            out.append({str(k): v for k, v in group.items()})  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return out
