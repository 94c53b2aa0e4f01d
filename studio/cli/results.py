"""Machine-readable results (`show RUN --json`, `export RUN`) and the held-out test front table.

`show RUN --json` prints one JSON document (`run_document`) on stdout, with these stable keys:

- `format`: `"topology-studio.run/1"` (the document's version; keys are only ever added);
- `run`: `run_id, problem, strategy, seed, status, reason, started_at, finished_at` (Unix
  seconds), `best_idx`, `budget_used` (`evaluations`, `usd` in USD, `wall_s` in s),
  `n_validation`, `n_test` (examples per split);
- `archive`: every candidate, `RunStore.archive(run_id, include_unevaluated=True)` rows (the
  objectives: `accuracy` share correct, `cost_usd` USD and `latency_ms` ms per example);
- `validation_front`: the archive rows on the validation Pareto front (`split="validation"`),
  with each candidate's paired interval against its cost-neighbours
  (`studio.views.front_noise.NOISE_COLUMNS`: `gain_vs_cheaper`, `gain_low`, `gain_high`,
  `within_noise`, ...);
- `test_front`: `RunStore.test_front` rows: the validation front's candidates with their
  held-out test scores (`test_*`; reported only, never used for selection) and
  `val_minus_test_accuracy`;
- `best`: the best validation candidate's archive row plus its `spec` (the topology as JSON),
  or null.

NaN and infinite numbers are written as `null` (JSON has neither).

`export RUN --format csv|json|parquet [--out DIR]` writes four tables with pandas' own writers,
one file each, named `<run>-<table>.<ext>`: `archive`, `validation_front`, `test_front` and
`examples` (every per-example result of the run: `candidate_idx` then
`RunStore.candidate_examples`'s columns, traces left out). It prints the paths written.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Final

import pandas as pd  # pyright: ignore[reportMissingTypeStubs]

from core.errors import ProblemError
from core.storage import RunStore
from studio.cli._common import CliUsageError, ExitCode, resolve_db_path
from studio.cli._output import Output
from studio.cli._report import TEST_FRONT_LABEL, print_test_front
from studio.cli.store import open_cli_store
from studio.views.front_noise import with_front_noise

__all__ = [
    "EXPORT_FORMATS",
    "EXPORT_TABLES",
    "RUN_DOCUMENT_FORMAT",
    "TEST_FRONT_LABEL",
    "cmd_export",
    "cmd_show_json",
    "export_tables",
    "print_test_front",
    "run_document",
]

RUN_DOCUMENT_FORMAT: Final = "topology-studio.run/1"
"""The `format` key of `show --json`'s document."""


EXPORT_FORMATS: Final = ("csv", "json", "parquet")
"""The formats `export` writes."""

EXPORT_TABLES: Final = ("archive", "validation_front", "test_front", "examples")
"""The tables `export` writes, one file each."""


def _plain(value: Any) -> Any:
    """A JSON-safe value: numpy scalars as Python ones, NaN / infinities / pandas NA as None."""
    if value is None or value is pd.NA:
        return None
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, str | bytes):
        try:
            value = item()
        except (ValueError, TypeError):
            pass
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}  # pyright: ignore[reportUnknownVariableType]
    return value


def _rows(df: pd.DataFrame) -> list[dict[str, Any]]:
    names = [str(c) for c in df.columns]
    return [
        {n: _plain(v) for n, v in zip(names, values, strict=True)}
        for values in df.itertuples(index=False)
    ]


def _tables(store: RunStore, run_id: str) -> dict[str, pd.DataFrame]:
    archive = store.archive(run_id, include_unevaluated=True)
    validation = store.archive(run_id, split="validation")
    front = (
        validation.loc[validation["on_front"].astype(bool)] if not validation.empty else validation
    )
    return {
        "archive": archive,
        "validation": validation,
        "validation_front": with_front_noise(
            store, run_id, pd.DataFrame(front).reset_index(drop=True)
        ),
        "test_front": store.test_front(run_id),
    }


def run_document(store: RunStore, run_id: str) -> dict[str, Any]:
    """The `show --json` document of a run (keys: see the module docstring).

    Raises:
        CliUsageError: no such run.
    """
    run = store.get_run(run_id)
    if run is None:
        raise CliUsageError(f"no run {run_id!r} in the database")
    tables = _tables(store, run_id)
    validation = tables["validation"]
    best_rows = (
        validation.loc[validation["is_best"].astype(bool)] if not validation.empty else validation
    )
    best: dict[str, Any] | None = None
    if not best_rows.empty:
        best = _rows(pd.DataFrame(best_rows))[0]
        spec_hash = best.get("spec_hash")
        spec_json = store.get_spec(str(spec_hash)) if spec_hash else None
        best["spec"] = json.loads(spec_json) if spec_json else None
    return {
        "format": RUN_DOCUMENT_FORMAT,
        "run": {
            "run_id": run.run_id,
            "problem": run.problem,
            "strategy": run.strategy,
            "seed": run.seed,
            "status": run.status,
            "reason": run.reason,
            "started_at": _plain(run.started_at),
            "finished_at": _plain(run.finished_at),
            "best_idx": run.best_idx,
            "budget_used": _plain(run.budget_used),
            "n_validation": run.config.get("n_validation"),
            "n_test": run.config.get("n_test"),
        },
        "archive": _rows(tables["archive"]),
        "validation_front": _rows(tables["validation_front"]),
        "test_front": _rows(tables["test_front"]),
        "best": best,
    }


def cmd_show_json(args: argparse.Namespace, out: Output) -> int:
    """`show RUN --json`: the run as one JSON document on stdout (no colour, no notes)."""
    from studio.cli.runs import resolve_run_id

    with open_cli_store(resolve_db_path(args.db), out) as store:
        doc = run_document(store, resolve_run_id(store, args.run))
    out.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
    out.stdout.flush()
    return ExitCode.OK


def _examples(store: RunStore, run_id: str, archive: pd.DataFrame) -> pd.DataFrame:
    frames: list[pd.DataFrame] = []
    for idx in [int(i) for i in archive["candidate_idx"].tolist()] if not archive.empty else []:
        ex = store.candidate_examples(run_id, idx)
        if not ex.empty:
            frames.append(ex.assign(candidate_idx=idx))
    if not frames:
        return pd.DataFrame(columns=["candidate_idx"])
    df = pd.concat(frames, ignore_index=True)
    return pd.DataFrame(df[["candidate_idx", *[c for c in df.columns if c != "candidate_idx"]]])


def export_tables(store: RunStore, run_id: str) -> dict[str, pd.DataFrame]:
    """The tables `export` writes (`EXPORT_TABLES`), by name."""
    tables = _tables(store, run_id)
    return {
        "archive": tables["archive"],
        "validation_front": tables["validation_front"],
        "test_front": tables["test_front"],
        "examples": _examples(store, run_id, tables["archive"]),
    }


def _write(df: pd.DataFrame, path: Path, fmt: str) -> None:
    if fmt == "csv":
        df.to_csv(path, index=False)
    elif fmt == "json":
        df.to_json(path, orient="records", indent=2, double_precision=15)
    else:
        df.to_parquet(path, index=False)


def _single_agent_latencies(store: RunStore, run_id: str) -> dict[tuple[str, str], float]:
    """`(agent, example id) -> latency ms` of the run's single-agent candidates (a pipeline of
    one registered agent step): the latency each such call was measured at, for calls that
    recorded no model time (hosted models over HTTP)."""
    from studio.cli.runs import candidate_spec

    found: dict[tuple[str, str], float] = {}
    for idx in sorted({int(r["candidate_idx"]) for r in store.archive_records(run_id)}):
        try:
            spec = candidate_spec(store, run_id, idx).model_dump(mode="json")
        except CliUsageError:
            continue
        steps = spec.get("steps") if spec.get("kind") == "pipeline" else [{"operation": spec}]
        if not isinstance(steps, list) or len(steps) != 1:
            continue
        operation = steps[0].get("operation") or {}
        agent = operation.get("agent_name")
        if operation.get("kind") != "agent_step" or not isinstance(agent, str):
            continue
        for row in store.candidate_examples(run_id, idx).to_dict("records"):
            if row["status"] == "ok" and row["trial"] == 0 and not row["cached"]:
                found.setdefault((agent, str(row["example_id"])), float(row["latency_ms"]))
    return found


def _export_replay(args: argparse.Namespace, out: Output) -> int:
    """`export RUN --replay DIR --problem PROBLEM`: the run's recorded calls as a replay problem
    (`core.problems.replay_export`). The problem comes from the command line (a run record
    never chooses the code to load) and must be the run's own (same name and config hash: its
    calls are in the call cache under that namespace).

    Raises:
        CliUsageError: no --problem, no such run, another problem than the run's, or nothing
            recorded (the call cache was off or is elsewhere).
    """
    from core.evaluation.call_cache import DuckDBCallCache, call_cache_path
    from core.problems import load_problem
    from core.problems.replay_export import export_replay
    from studio.cli.runs import resolve_run_id

    if not args.problem:
        raise CliUsageError(
            "export --replay needs --problem PROBLEM: the problem the run searched (its gold "
            "examples and agents; a run record never chooses the code to load)"
        )
    db = resolve_db_path(args.db)
    with open_cli_store(db, out) as store:
        run_id = resolve_run_id(store, args.run)
        run = store.get_run(run_id)
        latencies = _single_agent_latencies(store, run_id)
    problem = load_problem(args.problem)
    recorded_hash = None if run is None else run.problem_config.get("config_hash")
    if run is not None and (
        run.problem != problem.name or (recorded_hash and recorded_hash != problem.config_hash)
    ):
        raise CliUsageError(
            f"run {run_id} searched {run.problem!r}, not this {problem.name!r} (or another "
            "version of it): give the run's own problem, unchanged"
        )
    cache = DuckDBCallCache(call_cache_path(db), f"{problem.name}:{problem.config_hash}")
    target = Path(args.replay)
    try:
        root, n = export_replay(
            problem,
            cache,
            target,
            name=f"{problem.name}_replay",
            latencies=latencies,
            force=bool(args.force),
        )
    except ProblemError as exc:
        raise CliUsageError(str(exc)) from exc
    out.line(f"replay problem: {root} ({n} recorded calls)")
    out.line(f"search it offline: topology-studio search {root}")
    return ExitCode.OK


def cmd_export(args: argparse.Namespace, out: Output) -> int:
    """`export RUN --format csv|json|parquet [--out DIR]`: one file per table (see the module
    docstring), in DIR (default: the current folder, created if missing); prints each path.

    Raises:
        CliUsageError: an unknown format, no such run, or a folder that cannot be written.
    """
    if getattr(args, "replay", None):
        return _export_replay(args, out)
    fmt = str(args.format).lower()
    if fmt not in EXPORT_FORMATS:
        raise CliUsageError(f"unknown export format {args.format!r}: use csv, json or parquet")
    folder = Path(args.out) if args.out else Path.cwd()
    from studio.cli.runs import resolve_run_id

    with open_cli_store(resolve_db_path(args.db), out) as store:
        run_id = resolve_run_id(store, args.run)
        tables = export_tables(store, run_id)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        written: list[Path] = []
        for name in EXPORT_TABLES:
            path = folder / f"{run_id}-{name}.{fmt}"
            _write(tables[name], path, fmt)
            written.append(path)
    except OSError as exc:
        raise CliUsageError(
            f"cannot write the export to {folder}: {exc.strerror or exc} (give --out a "
            "writable folder)"
        ) from exc
    for name, path in zip(EXPORT_TABLES, written, strict=True):
        out.line(f"{name}: {path} ({len(tables[name])} rows)")
    return ExitCode.OK
