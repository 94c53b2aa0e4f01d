"""Messages that named the wrong cause or spoke Python to a command-line user.

- `--meta-model bogus` said the model "has no price"; it is not a `provider:model` name at all
  (and `nosuch:model` names no provider pydantic-ai knows: it says so, before the price).
- `evaluate ... --limit 0` said the problem has no validation examples (it has 300).
- `--max-evaluations 0` said "give a positive value or None (no limit)": there is no None on a
  command line (and no flag for no limit); the flags now say their valid range, and a zero from
  the problem's settings names the setting and the flag.
- `--debug` worked only before the command; it now works after it too, which the internal-error
  hint ("run the command again with --debug") relies on.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from studio.cli import main
from studio.cli import runs as cli_runs

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")
SEED = REPO / "data" / "problems" / "gsm8k_replay" / "seed.json"


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, list[str]]:
    code = main(list(argv))
    cap = capsys.readouterr()
    return code, cap.out, cap.err.splitlines()


def _no_journal(workdir: Path) -> bool:
    journals = workdir / "runs.duckdb.journals"
    return not journals.exists() or list(journals.iterdir()) == []


# ---- designer model names ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("bogus", "designer model 'bogus' is not a provider:model name: give one such as "
                  "openai:gpt-4o-mini or ollama:llama3.1"),
        ("openai:", "designer model 'openai:' is not a provider:model name: give one such as "
                    "openai:gpt-4o-mini or ollama:llama3.1"),
        ("nosuch:model", "designer model 'nosuch:model' cannot be built: Unknown model: "
                         "nosuch:model"),
    ],
)  # fmt: skip
def test_a_designer_model_that_is_no_model_name_says_so(
    workdir: Path, capsys: pytest.CaptureFixture[str], model: str, message: str
) -> None:
    argv = ["search", "gsm8k_replay", "--strategy", "meta-agent", "--meta-model", model]
    code, out, err = _run(capsys, *argv, "--max-evaluations", "2", "--time-scale", "0")
    assert (code, out, err) == (2, "", [f"topology-studio: error: {message}"])
    assert _no_journal(workdir)


# ---- evaluate --limit -------------------------------------------------------------------------


def test_evaluate_limit_zero_names_the_limit(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "evaluate", "gsm8k_replay", str(SEED), "--limit", "0")
    assert (code, out) == (2, "")
    assert err == [
        "topology-studio: error: evaluate: argument --limit: must be at least 1, got 0 "
        "(see 'topology-studio evaluate --help')"
    ]


@pytest.mark.parametrize(
    ("command", "value", "message"),
    [
        ("search", "0", "expected a whole number of at least 1 or 'auto', not '0'"),
        ("evaluate", "two", "expected a whole number of at least 1 or 'auto', not 'two'"),
    ],
)
def test_a_bad_workers_value_says_what_is_accepted(
    workdir: Path, capsys: pytest.CaptureFixture[str], command: str, value: str, message: str
) -> None:
    args = ["gsm8k_replay"] if command == "search" else ["gsm8k_replay", str(SEED)]
    code, out, err = _run(capsys, command, *args, "--workers", value)
    assert (code, out) == (2, "")
    assert err == [
        f"topology-studio: error: {command}: argument --workers: {message} "
        f"(see 'topology-studio {command} --help')"
    ]
    assert _no_journal(workdir)


def test_a_bad_workers_setting_names_the_setting(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "search", "gsm8k_replay", "--set", "search.workers=0")
    assert (code, out) == (2, "")
    assert len(err) == 1
    assert err[0].endswith(
        "problem.toml: field 'search.workers': Value error, must be a whole number of at least 1 "
        "or 'auto' (got 0) [value from overrides]"
    )
    assert _no_journal(workdir)


# ---- budgets of zero --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--max-evaluations", "0", "must be at least 1, got 0"),
        ("--patience", "0", "must be at least 1, got 0"),
        ("--max-usd", "0", "must be a finite number above 0, got 0"),
        ("--max-wall-s", "0.0", "must be a finite number above 0, got 0.0"),
        ("--max-usd", "inf", "must be a finite number above 0, got inf"),
    ],
)
def test_a_budget_flag_of_zero_gives_its_range(
    workdir: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    code, out, err = _run(capsys, "search", "gsm8k_replay", flag, value)
    assert (code, out) == (2, "")
    assert err == [
        f"topology-studio: error: search: argument {flag}: {message} "
        "(see 'topology-studio search --help')"
    ]
    assert _no_journal(workdir)


def test_a_zero_budget_from_the_problem_names_the_setting_and_the_flag(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "search", "gsm8k_replay", "--set", "search.max_usd=0")
    assert (code, out) == (2, "")
    assert err == [
        "topology-studio: error: problem gsm8k_replay: search.max_usd = 0 allows no work: "
        "give --max-usd with a value above 0, or change search.max_usd in its problem.toml (or "
        "the --set that gave it)"
    ]
    assert _no_journal(workdir)


def test_the_flag_replaces_a_zero_from_the_problem(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = workdir / "zero_usd"
    shutil.copytree(REPO / "data" / "problems" / "gsm8k_replay", problem)
    toml = problem / "problem.toml"
    text = toml.read_text()
    assert "max_usd = 20000.0" in text
    toml.write_text(text.replace("max_usd = 20000.0", "max_usd = 0", 1))
    argv = ["search", str(problem), "--max-usd", "5", "--max-evaluations", "1", "--no-test"]
    code, out, err = _run(capsys, *argv, "--set", "gold.validation_size=5", "--time-scale", "0")
    assert code == 0, err
    assert "status:         stopped (max_evaluations reached (1))" in out.splitlines()


# ---- --debug ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--debug", "runs", "--db", "{db}"],
        ["runs", "--db", "{db}", "--debug"],
        ["runs", "--debug", "--db", "{db}"],
    ],
)
def test_debug_before_or_after_the_command_prints_the_traceback(
    workdir: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    db = workdir / "notdb.duckdb"
    db.write_text("text\n")
    code, out, err = _run(capsys, *(a.replace("{db}", str(db)) for a in argv))
    assert (code, out) == (2, "")
    assert err[0] == (
        f"topology-studio: error: cannot open the run store {db}: IO Error: The file "
        f'"{db}" exists, but it is not a valid DuckDB database file!'
    )
    assert err[1] == "Traceback (most recent call last):"
    assert err[-1].startswith("core.errors.StoreError: cannot open the run store ")


def test_without_debug_the_error_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = workdir / "notdb.duckdb"
    db.write_text("text\n")
    code, _, err = _run(capsys, "runs", "--db", str(db))
    assert code == 2
    assert len(err) == 1


def test_an_internal_error_says_how_to_see_its_traceback(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object) -> int:
        raise RuntimeError("boom")

    monkeypatch.setattr(cli_runs, "cmd_runs", broken)
    code, out, err = _run(capsys, "runs")
    assert (code, out) == (1, "")
    assert err == [
        "topology-studio: error: internal error: RuntimeError: boom (run the command again "
        "with --debug for the traceback)"
    ]
    code, _, err = _run(capsys, "runs", "--debug")
    assert code == 1
    assert err[1] == "Traceback (most recent call last):"
    assert err[-1] == "RuntimeError: boom"
