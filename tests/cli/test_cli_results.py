"""`show RUN --json`, `export RUN` and the test front in `show` (every candidate of the final
validation front scored once on the test split; machine-readable results), on a run built from
events."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "storage"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "contracts"))

from test_store_test_front import _run  # noqa: E402

from core.storage import DuckDBRunStore  # noqa: E402
from studio.cli import main  # noqa: E402


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("TOPOLOGY_STUDIO_DB", raising=False)
    path = tmp_path / "runs.duckdb"
    with DuckDBRunStore(path, auto_ingest=False) as store:
        store.record_events(_run([0, 1, 3]))
    return path


def test_show_json_is_one_document_with_stable_keys(
    db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "run-a", "--json", "--db", str(db)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert list(doc) == ["format", "run", "archive", "validation_front", "test_front", "best"]
    assert doc["format"] == "topology-studio.run/1"
    assert doc["run"]["run_id"] == "run-a"
    assert doc["run"]["status"] == "completed"
    assert [r["candidate_idx"] for r in doc["archive"]] == [0, 1, 2, 3]
    assert [r["candidate_idx"] for r in doc["validation_front"]] == [0, 1, 3]
    assert [(r["candidate_idx"], r["test_accuracy"], r["on_test_front"]) for r in doc["test_front"]] == [
        (0, 0.55, True),
        (1, 0.5, False),
        (3, 0.92, True),
    ]  # fmt: skip
    assert doc["best"]["candidate_idx"] == 1
    assert doc["best"]["spec"] == {
        "kind": "pipeline",
        "steps": [{"operation": {"kind": "function_step", "callable_name": "f1"}}],
        "name": "c1",
    }


def test_show_prints_the_test_front_labelled(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["show", "run-a", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("== Test front (held-out test: reported only, never used for selection) ==")
    assert out[at + 1].split() == [
        "candidate", "val_accuracy", "val_cost_usd", "test_accuracy", "test_cost_usd",
        "test_latency_ms", "test_score", "val_minus_test", "test_front",
    ]  # fmt: skip
    assert out[at + 2].split() == ["0", "0.5000", "0.010000", "0.5500", "0.011000", "100.0"] + [
        "0.5400",
        "-5.00",
        "*",
    ]
    assert out[at + 3].split() == ["1", "0.8000", "0.050000", "0.5000", "0.060000", "100.0"] + [
        "0.4900",
        "+30.00",
    ]
    assert out[at + 5] == (
        "(3 of 3 validation-front candidates scored once on the 1019 held-out test problems; "
        "* = no other of them is at least as good on test on all objectives and better on one. "
        "The front and the best are chosen on validation only.)"
    )
    # (0.50 - 0.55) + (0.80 - 0.50) + (0.90 - 0.92) = 0.23 over three: +7.67 points
    assert out[at + 6] == (
        "mean validation - test accuracy over the 3 scored: +7.67 points (positive: validation, "
        "where they were chosen, flattered them)"
    )


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_export_writes_one_file_per_table(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    out_dir = tmp_path / "out"
    assert main(["export", "run-a", "--format", fmt, "--out", str(out_dir), "--db", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = ["archive", "validation_front", "test_front", "examples"]
    counts = [4, 3, 3, 0]
    assert lines == [
        f"{n}: {out_dir / f'run-a-{n}.{fmt}'} ({c} rows)"
        for n, c in zip(names, counts, strict=True)
    ]
    read = {"csv": pd.read_csv, "parquet": pd.read_parquet}.get(fmt)
    path = out_dir / f"run-a-test_front.{fmt}"
    tf = read(path) if read else pd.read_json(path, orient="records")
    assert tf["candidate_idx"].tolist() == [0, 1, 3]
    assert tf["test_accuracy"].tolist() == [0.55, 0.5, 0.92]


def test_export_errors_name_what_is_wrong(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "run-a", "--format", "xml", "--db", str(db)]) == 2
    assert capsys.readouterr().err == (
        "topology-studio: error: unknown export format 'xml': use csv, json or parquet\n"
    )
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["export", "run-a", "--out", str(blocker / "sub"), "--db", str(db)]) == 2
    assert capsys.readouterr().err == (
        f"topology-studio: error: cannot write the export to {blocker / 'sub'}: Not a directory "
        "(give --out a writable folder)\n"
    )
    assert main(["export", "nope", "--db", str(db)]) == 2
    assert capsys.readouterr().err.startswith("topology-studio: error: no run 'nope'")
