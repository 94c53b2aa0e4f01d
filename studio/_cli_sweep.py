"""`topology-studio sweep PROBLEM --strategies a,b --seeds 1-5`: searches run concurrently, one
named group (issue 18, item 5).

Each (strategy, seed) is a normal `topology-studio search` run in its own process (so each is
recorded in the store exactly as a search typed by hand), `--parallel` at a time; `--executor`,
`--ray-address` and `--rate-limit` are passed on (so each search has its own budget: a sweep's
searches do not share one). The group is a JSON file in `<db>.sweeps/<name>.json`
(`name`, `problem`, `strategies`, `seeds`, `runs`: the run ids in (strategy, seed) order), and
the command prints the studio's Run overlay link that opens every run of the group at once
(`/overlay?runs=ID,ID,...`).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from studio._cli_common import CliUsageError, ExitCode, resolve_db_path
from studio._cli_output import Output

__all__ = ["cmd_sweep", "parse_seeds", "sweep_dir"]

_RUN_LINE = re.compile(r"^show:\s+\S+ show (\S+)", re.MULTILINE)


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


def cmd_sweep(args: argparse.Namespace, out: Output) -> int:
    """Run the sweep (see the module docstring); exit 0 when every search succeeded."""
    strategies = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if not strategies:
        raise CliUsageError("--strategies: name at least one strategy")
    seeds = parse_seeds(args.seeds)
    db = resolve_db_path(args.db)
    name = args.name or f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", name):
        raise CliUsageError(f"--name: letters, digits, '.', '_' and '-' only, not {name!r}")
    jobs = [(s, n) for s in strategies for n in seeds]

    def one(job: tuple[str, int]) -> tuple[int, str | None, str]:
        strategy, seed = job
        argv = [sys.executable, "-m", "studio.cli", "search", args.problem, "--db", str(db)]
        argv += ["--strategy", strategy, "--seed", str(seed), "--executor", args.executor]
        if args.ray_address:
            argv += ["--ray-address", args.ray_address]
        for provider, limit in getattr(args, "rate_limit", []):
            parts = (limit.requests_per_minute, limit.tokens_per_minute, limit.max_concurrent)
            text = ":".join("" if v is None else f"{v:g}" for v in parts)
            argv += ["--rate-limit", f"{provider}={text}"]
        if args.max_evaluations is not None:
            argv += ["--max-evaluations", str(args.max_evaluations)]
        if args.no_test:
            argv.append("--no-test")
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        m = _RUN_LINE.search(done.stdout)
        return done.returncode, None if m is None else m.group(1), done.stderr[-2000:]

    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        answers = list(pool.map(one, jobs))
    runs: list[str] = []
    failed = 0
    for (strategy, seed), (code, run_id, err) in zip(jobs, answers, strict=True):
        if code != 0 or run_id is None:
            failed += 1
            out.error(f"{strategy} seed {seed}: search failed (exit {code}): {err.strip()}")
        else:
            runs.append(run_id)
            out.line(f"{strategy:>14} seed {seed:<4} run {run_id}")
    group = {
        "name": name,
        "problem": args.problem,
        "strategies": strategies,
        "seeds": seeds,
        "runs": runs,
    }
    folder = sweep_dir(db)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(group, indent=2) + "\n")
    out.line(f"sweep {name}: {len(runs)} runs recorded in {db}")
    out.line(f"overlay: open the studio's Run overlay page at /overlay?runs={','.join(runs)}")
    return ExitCode.OK if not failed else ExitCode.FAILED


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
