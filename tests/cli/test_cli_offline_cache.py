"""A newcomer's path, offline (the README's first command sets the datasets variable only for
itself): the demo's first load fills the dataset
cache, so every later command finds the data with `TOPOLOGY_STUDIO_DATASETS` unset, and a
tampered cached file fails its sha256 check with one clear line.

Run in a temporary HOME and cache directory (`TOPOLOGY_STUDIO_CACHE`), so the checkout's own
`data/.cache/` plays no part.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from cli_text import section

from core.problems import sha256_file
from studio.cli import main
from studio.cli._output import Output
from studio.cli.demo import demo_data

DATASETS = os.environ["TOPOLOGY_STUDIO_DATASETS"]  # tests/conftest.py's one fallback rule
TEST_SHA = "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14"
SOLUTIONS_SHA = "4bc62db838f8418365d51c627bd66294cbdca9fb7f01519cb13f0dce8c51580b"
TINY = [
    "--seed", "1", "--max-evaluations", "1", "--minibatch-size", "5",
    "--set", "gold.validation_size=10", "--time-scale", "0", "--no-test",
]  # fmt: skip


@pytest.fixture
def newcomer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh HOME, an empty cache, the database under tmp_path, the datasets variable set."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_demo_fills_the_cache_and_search_then_needs_no_variable(
    newcomer: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cached = newcomer / "cache" / "datasets" / "gsm8k"
    out = Output(rich_output=False)
    demo_data(out)
    printed = section(capsys.readouterr().out, "Data")
    assert printed[0] == (
        "gsm8k_replay: OK (validation 100, test 919, train 300 examples; checksums verified; cached in "
        f"{newcomer / 'cache' / 'datasets'})"
    )
    assert sha256_file(cached / "test.jsonl") == TEST_SHA
    assert sha256_file(cached / "example_model_solutions.jsonl") == SOLUTIONS_SHA

    monkeypatch.delenv("TOPOLOGY_STUDIO_DATASETS")
    code = main(["search", "gsm8k_replay", *TINY])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "dataset" not in cap.err


def test_a_tampered_cached_file_fails_its_checksum(
    newcomer: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    demo_data(Output(rich_output=False))
    capsys.readouterr()
    cached = newcomer / "cache" / "datasets" / "gsm8k" / "test.jsonl"
    with cached.open("ab") as f:
        f.write(b'{"question": "1+1?", "answer": "#### 3"}\n')
    actual = sha256_file(cached)

    monkeypatch.delenv("TOPOLOGY_STUDIO_DATASETS")
    code = main(["search", "gsm8k_replay", *TINY])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.out == ""
    assert cap.err.splitlines() == [
        f"topology-studio: error: {cached} (cache) fails its checksum: expected sha256 "
        f"{TEST_SHA}, actual sha256 {actual}. The file is corrupted or a different version: "
        "replace it with the pinned file from https://raw.githubusercontent.com/openai/"
        "grade-school-math/3101c7d5072418e28b9008a6636bde82a006892c/grade_school_math/data/"
        "test.jsonl, or delete it (it is re-downloaded)."
    ]
