"""`search PROBLEM --resume RUN` loads the problem named on the command line, never one that a
journal names: stored data never chooses the code a resume loads.

A journal is stored data. Its `run_started` line used to choose the problem a resume loaded
(`problem_config.toml_path`, or `problem` given as a path), so a line edited to point at
another directory made `--resume` import and run that directory's `registries.py`. Now the
problem is always the one given on the command line; without it the resume is refused with the
command to type, and a problem other than the recorded one (name, or the problem files' content
hash the run recorded) is refused in one line naming both. Nothing here runs a search: every
case is refused before one would start.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.problems import load_problem
from core.storage import encode_event, journal_path
from core.vocab.events import RunStarted
from studio.cli import main

RUN = "20250101-000000-abcdef"

TOML = """\
name = "toy"
registries = "registries.py"
seed = "seed.json"

[gold]
source = "jsonl"
path = "gold.jsonl"
validation_size = 2
split_salt = "toy"
"""

REGISTRIES = """\
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


def upper(x):
    return str(x).upper()


def exact(output, example):
    return 1.0 if str(output).strip() == example.expected else 0.0


def build(ctx: ProblemContext) -> ProblemParts:
    callables = CallableRegistry()
    callables.register("upper", upper, "Upper-case the text.")
    return ProblemParts(
        callable_registry=callables,
        agent_registry=AgentRegistry(),
        score_functions={"exact": exact},
    )
"""

SEED = {
    "kind": "pipeline",
    "id": "seed",
    "steps": [{"operation": {"kind": "function_step", "id": "up", "callable_name": "upper"}}],
}

GOLD = "".join(
    json.dumps({"id": f"q{i}", "input": f"q {i}", "expected": f"Q {i}"}) + "\n" for i in range(4)
)


def _problem_dir(root: Path, registries: str = REGISTRIES) -> Path:
    root.mkdir(parents=True)
    (root / "problem.toml").write_text(TOML)
    (root / "registries.py").write_text(registries)
    (root / "seed.json").write_text(json.dumps(SEED))
    (root / "gold.jsonl").write_text(GOLD)
    return root


def _evil_dir(root: Path, marker: Path) -> Path:
    """A problem directory whose module writes `marker` when it is imported."""
    code = f"from pathlib import Path\nPath({str(marker)!r}).write_text('imported')\n"
    return _problem_dir(root, code + REGISTRIES)


def _journal(db: Path, problem: str, problem_config: dict[str, object]) -> Path:
    started = RunStarted(
        run_id=RUN,
        seq=0,
        ts=1.7e9,
        problem=problem,
        strategy="random",
        seed=1,
        config={"budget": {"max_evaluations": 3}},
        problem_config=problem_config,
    )
    path = journal_path(db, RUN)
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_event(started) + b"\n")
    return path


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TOPOLOGY_STUDIO_DB", raising=False)
    monkeypatch.chdir(tmp_path)


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], journal: Path) -> str:
    before = journal.read_bytes()
    code = main(argv)
    cap = capsys.readouterr()
    assert code == 2, cap.err
    assert cap.out == ""
    assert journal.read_bytes() == before  # nothing appended
    (line,) = cap.err.splitlines()
    return line


def test_a_journal_naming_another_problem_directory_is_never_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The crafted line names the other directory both ways (`problem` as a path and
    `problem_config.toml_path`): a resume without PROBLEM used to import its module."""
    marker = tmp_path / "imported.txt"
    evil = _evil_dir(tmp_path / "elsewhere" / "evil", marker)
    db = tmp_path / "runs.duckdb"
    journal = _journal(
        db, str(evil), {"name": "toy", "toml_path": str(evil / "problem.toml"), "overrides": {}}
    )
    line = _refused(capsys, ["search", "--resume", RUN, "--db", str(db)], journal)
    assert line == (
        f"topology-studio: error: resuming run {RUN} needs its problem on the command line (a "
        "journal never chooses the code to load): "
        f"topology-studio search PROBLEM --resume {RUN} --db {db}"
    )
    assert not marker.exists()


def test_without_problem_the_refusal_says_the_command_with_the_recorded_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.duckdb"
    journal = _journal(db, "toy", {"name": "toy", "overrides": {}})
    line = _refused(capsys, ["search", "--resume", RUN, "--db", str(db)], journal)
    assert line.endswith(f": topology-studio search toy --resume {RUN} --db {db}")


def test_another_problem_than_the_recorded_one_is_refused_naming_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The journal says the run is of the other directory's problem; the researcher names
    theirs: refused, and the other directory is still never imported."""
    marker = tmp_path / "imported.txt"
    evil = _evil_dir(tmp_path / "elsewhere" / "evil", marker)
    mine = _problem_dir(tmp_path / "mine")
    recorded = load_problem(mine).to_dict()
    db = tmp_path / "runs.duckdb"
    journal = _journal(
        db, "evil", {**recorded, "name": "evil", "toml_path": str(evil / "problem.toml")}
    )
    line = _refused(capsys, ["search", str(mine), "--resume", RUN, "--db", str(db)], journal)
    files = recorded["files_sha256"][:12]
    assert line == (
        f"topology-studio: error: cannot resume run {RUN} with another problem than it was "
        f"started with: recorded problem 'evil' (files sha256 {files}), given problem 'toy' at "
        f"{mine.resolve()} (files sha256 {files}); name the run's own problem, unchanged"
    )
    assert not marker.exists()


def test_changed_problem_files_are_refused_naming_both_hashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Same name, but the problem's module changed since the run was recorded."""
    mine = _problem_dir(tmp_path / "mine")
    recorded = load_problem(mine).to_dict()
    db = tmp_path / "runs.duckdb"
    journal = _journal(db, "toy", recorded)
    changed = tmp_path / "mine_v2"
    _problem_dir(changed, REGISTRIES + "\n# edited\n")
    now = load_problem(changed).files_sha256
    assert now != recorded["files_sha256"]
    line = _refused(capsys, ["search", str(changed), "--resume", RUN, "--db", str(db)], journal)
    assert line == (
        f"topology-studio: error: cannot resume run {RUN} with another problem than it was "
        f"started with: recorded problem 'toy' (files sha256 {recorded['files_sha256'][:12]}), "
        f"given problem 'toy' at {changed.resolve()} (files sha256 {now[:12]}); name the run's "
        "own problem, unchanged"
    )


def test_a_recorded_registries_override_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recorded `--set registries=...` would choose another module inside the problem."""
    mine = _problem_dir(tmp_path / "mine")
    (mine / "other.py").write_text(f"open({str(tmp_path / 'imported.txt')!r}, 'w')\n")
    recorded = load_problem(mine).to_dict()
    db = tmp_path / "runs.duckdb"
    journal = _journal(db, "toy", {**recorded, "overrides": {"registries": "other.py"}})
    line = _refused(capsys, ["search", str(mine), "--resume", RUN, "--db", str(db)], journal)
    assert line == (
        f"topology-studio: error: run {RUN} records an override of registries (other.py): "
        "resume loads only the problem's own module, so start a new search instead"
    )
    assert not (tmp_path / "imported.txt").exists()


def test_the_files_hash_covers_every_file_the_loader_reads(tmp_path: Path) -> None:
    """problem.toml, the module, the seed spec and a jsonl gold file each change the hash; a
    file the problem does not name does not."""
    base = load_problem(_problem_dir(tmp_path / "p0")).files_sha256
    assert len(base) == 64
    edits = {
        "problem.toml": TOML + "\n# note\n",
        "registries.py": REGISTRIES + "\n",
        "seed.json": json.dumps(SEED, indent=1),
        "gold.jsonl": GOLD + "\n",
    }
    for i, (name, text) in enumerate(edits.items(), start=1):
        d = _problem_dir(tmp_path / f"p{i}")
        (d / name).write_text(text)
        assert load_problem(d).files_sha256 != base, name
    d = _problem_dir(tmp_path / "p_extra")
    (d / "notes.txt").write_text("not read by the loader")
    assert load_problem(d).files_sha256 == base


def test_a_journal_symlinked_out_of_its_folder_is_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The run's journal path is chosen by the run id, but a symlink there could lead anywhere:
    it is refused before a byte is read."""
    mine = _problem_dir(tmp_path / "mine")
    elsewhere = tmp_path / "elsewhere.jsonl"
    db = tmp_path / "runs.duckdb"
    real = _journal(db, "toy", load_problem(mine).to_dict())
    real.rename(elsewhere)
    real.symlink_to(elsewhere)
    line = _refused(capsys, ["search", str(mine), "--resume", RUN, "--db", str(db)], real)
    assert line == (
        f"topology-studio: error: cannot resume run {RUN}: its journal {real} leads outside "
        f"{real.parent} (to {elsewhere}); a journal is read only inside its folder"
    )
