"""Wording of what the command line prints: `candidates` and `example runs` named apart, the cost
total saying what it counts, and a front table that fits 80 columns on a terminal without cutting a
word."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))
from store_contract import RunBuilder  # noqa: E402

from core.storage import DuckDBRunStore, encode_event, journal_path  # noqa: E402
from studio.cli import main  # noqa: E402
from studio.cli._output import Output  # noqa: E402
from studio.cli._report import print_front  # noqa: E402

OPERATORS = ["seed", "mutate:wrap_in_parallel", "mutate:agreement_gate", "opening:cascade"]


def _row(idx: int, op: str, acc: float, *, best: bool = False) -> dict[str, object]:
    return {
        "candidate_idx": idx, "accuracy": acc, "cost_usd": 1.423456, "latency_ms": 12345.6,
        "n_agents": 3, "depth": 3, "aggregate_score": acc - 0.1, "error_rate": 0.3,
        "operator": op, "is_best": best, "on_front": True,
    }  # fmt: skip


def test_the_front_fits_80_columns_and_wraps_operators_at_word_boundaries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    archive = pd.DataFrame(
        [_row(i, op, 0.3 + i / 100, best=i == 1) for i, op in enumerate(OPERATORS)]
        + [_row(4, "crossover", 0.2), _row(5, "crossover", 0.2)]
    )
    buf = io.StringIO()
    print_front(Output(stdout=buf, rich_output=True), archive)
    lines = re.sub(r"\x1b\[[0-9;]*m", "", buf.getvalue()).splitlines()
    assert max(len(line) for line in lines) <= 80
    body = lines[lines.index(next(x for x in lines if x.lstrip().startswith("#"))) :]
    header = body[0].split()
    assert header == [
        "#", "acc", "cost", "$", "lat", "ms", "agents", "depth", "errors", "score", "made",
        "by", "same", "as", "*",
    ]  # fmt: skip
    words = {w for line in body[2:] for w in re.findall(r"[a-z]+", line)}
    # every operator word whole, none cut ("paral" / "lel", "agreeme" / "nt")
    assert words == {
        "seed", "mutate", "wrap", "in", "parallel", "agreement", "gate", "opening", "cascade",
        "crossover",
    }  # fmt: skip
    assert any("0.3000" in line for line in body)  # the error rate column


def test_runs_names_candidates_and_example_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.duckdb"
    b = RunBuilder("r1")
    events = [
        b.started(),
        b.finished(budget_used={"evaluations": 4.0, "usd": 0.006, "wall_s": 1.5}),
    ]
    path = journal_path(db, "r1")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(encode_event(e) + b"\n" for e in events))
    with DuckDBRunStore(db) as store:
        store.ingest()
    assert main(["runs", "--db", str(db)]) == 0
    header = capsys.readouterr().out.splitlines()[0].split()
    assert header == [
        "run", "problem", "strategy", "status", "started", "candidates", "example_runs",
        "cost_usd", "design_usd", "design_tokens", "best", "best_score",
    ]  # fmt: skip
