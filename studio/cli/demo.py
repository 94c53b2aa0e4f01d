"""`demo [--no-ui]`: check the data, run a short offline search, open the studio."""

from __future__ import annotations

import argparse

from core.problems import Problem, default_cache_root, load_problem
from core.search.budget import Budget
from core.storage import new_run_id
from studio.cli._common import ExitCode, resolve_db_path
from studio.cli._output import Output
from studio.cli._report import structure_line
from studio.cli._setup import SearchSetup, create_journal
from studio.cli.search import check_store, run_and_report
from studio.cli.studio import launch_studio

__all__ = [
    "DEMO_BUDGET",
    "DEMO_PROBLEM",
    "cmd_demo",
    "demo_data",
]

DEMO_PROBLEM = "gsm8k_replay"
"""The problem the demo searches (offline: replayed GPT-3 runs)."""

DEMO_BUDGET: dict[str, int] = {
    "max_evaluations": 10,
    "minibatch_size": 10,
    "validation_size": 100,
    "test_size": 100,
}
"""The demo's short search: 10 candidate evaluations on minibatches of 10, offline, on the first
100 validation problems (by the problem's hash order: `gold.validation_size` 100) and a held-out
test of the first 100 test problems (`build_search`'s `test_size`). Each example run of a cold
replayed topology costs about 4.4 ms of one core (cProfile of `demo --no-ui`: pydantic-ai's
`Agent.run` under `core.agents.usage.run_agent` is most of it), and the full splits (300
validation for every candidate, 719 test for each front candidate) made the demo ~40 s cold;
these sizes made it ~10 s, and since the example memo answers a rerun of a run with a
`fastest` race, 4.5-4.9 s cold on a fresh clone (three runs, 2026-12-08, 195-201 MiB peak).
`full search` runs the real thing."""


def demo_data(out: Output) -> Problem:
    """The demo's data step: load `DEMO_PROBLEM` and print what was found.

    Loading checks every file's sha256 and copies a file found in `$TOPOLOGY_STUDIO_DATASETS`
    into the cache (`core.problems.datasets`), so every later command finds the data with the
    variable unset.

    Raises:
        DatasetError: a file is missing everywhere or fails its checksum.
    """
    out.heading("Data")
    problem = load_problem(
        DEMO_PROBLEM, overrides={"gold.validation_size": DEMO_BUDGET["validation_size"]}
    )
    sizes = ", ".join(f"{k} {len(v)}" for k, v in problem.splits.items())
    cache = default_cache_root() / "datasets"
    out.line(f"{problem.name}: OK ({sizes} examples; checksums verified; cached in {cache})")
    test = len(problem.splits.get("test", []))
    out.line(
        f"the demo's short search: validation {len(problem.splits['validation'])}, held-out test "
        f"{min(test, DEMO_BUDGET['test_size'])} of {test} (the full search below uses the "
        "problem's own splits)"
    )
    out.line(f"seed topology: {structure_line(problem.seed_spec)}")
    return problem


def cmd_demo(args: argparse.Namespace, out: Output) -> int:
    """`demo [--no-ui]`: check the data, run a short offline search, open the studio."""
    db = resolve_db_path(args.db)
    check_store(db)
    problem = demo_data(out)
    budget = problem.search
    run_id = new_run_id()
    setup = SearchSetup(
        problem=problem,
        strategy="evolutionary",
        seed=args.seed,
        config={"minibatch_size": DEMO_BUDGET["minibatch_size"]},
        budget=Budget(
            max_evaluations=DEMO_BUDGET["max_evaluations"],
            max_usd=budget.max_usd,
            max_wall_s=budget.max_wall_time_s,
        ),
        model=None,
        use_test_split=True,
        run_id=run_id,
        journal=create_journal(db, run_id),
        resumed=False,
        test_size=DEMO_BUDGET["test_size"],
    )
    out.heading("Short search")
    code = run_and_report(setup, db, out)
    if code == ExitCode.OK:
        # a 10-evaluation demo rarely beats the seed: say how to run the real thing
        n = problem.search.max_evaluations
        out.kv(
            [
                (
                    "full search",
                    f"topology-studio search {DEMO_PROBLEM} --seed {args.seed} --db {db}   "
                    f"({n} candidates, 1-3 minutes on 2 cores: finds ensembles and cascades)",
                )
            ]
        )
    if code != ExitCode.OK or args.no_ui:
        return code
    return launch_studio(db, out, port=args.port)
