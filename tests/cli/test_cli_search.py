"""The command line on real work: bad inputs, and a small search end to end in a subprocess.

Every bad input of the acceptance gives one clear line on stderr, a non-zero exit and no
traceback. The end-to-end search runs `python -m studio.cli search ...` on a small slice of the
GSM8K replay problem and checks that what it printed is what the run store holds.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_text import kv, section

from core.ir import parse_topology
from core.search.registry import TopologyRegistry
from core.storage import DuckDBRunStore, journal_path
from studio.cli import main
from studio.cli._output import fmt_float
from studio.cli._report import ACCURACY_COST

REPO = Path(__file__).resolve().parents[2]
DATASETS = os.environ.get("TOPOLOGY_STUDIO_DATASETS") or str(REPO.parent / "shared" / "datasets")
PROBLEM_DIR = REPO / "data" / "problems" / "gsm8k_replay"

# a small slice: 20 validation problems, minibatches of 5, 4 candidate evaluations, no sleeping
SMALL = [
    "--seed", "1",
    "--max-evaluations", "4",
    "--minibatch-size", "5",
    "--set", "gold.validation_size=20",
    "--time-scale", "0",
]  # fmt: skip


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens on it once the socket is closed


def _one_error_line(code: int, out: str, err: str) -> str:
    assert code != 0
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("topology-studio: error: ")
    return lines[0]


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Datasets from the shared folder, an empty cache, the database under tmp_path."""
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", DATASETS)
    monkeypatch.setenv("TOPOLOGY_STUDIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---- bad inputs: one clear line, non-zero exit, no traceback --------------------------------


def test_missing_dataset_with_no_network(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = isolated / "empty"
    empty.mkdir()
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", str(empty))
    url = f"http://127.0.0.1:{_closed_port()}/{{file}}"
    code = main(["search", "gsm8k_replay", "--set", f"datasets.gsm8k.url={url}"])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert "dataset 'gsm8k' file 'test.jsonl' is not available" in line
    assert str(empty / "gsm8k" / "test.jsonl") in line
    assert "Connection refused" in line
    assert "Set TOPOLOGY_STUDIO_DATASETS" in line


def test_wrong_checksum(
    isolated: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = isolated / "bad_data" / "gsm8k"
    bad.mkdir(parents=True)
    (bad / "test.jsonl").write_text('{"question": "1+1?", "answer": "#### 3"}\n')
    monkeypatch.setenv("TOPOLOGY_STUDIO_DATASETS", str(bad.parent))
    code = main(["search", "gsm8k_replay"])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert f"{bad / 'test.jsonl'} (TOPOLOGY_STUDIO_DATASETS) fails its checksum" in line
    assert "expected sha256 3730d312" in line


def test_malformed_problem_toml(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    problem = isolated / "broken"
    problem.mkdir()
    (problem / "problem.toml").write_text('name = "broken"\n[search\nmax_evaluations = 3\n')
    code = main(["search", str(problem)])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert f"{problem / 'problem.toml'}: not valid TOML" in line


def test_seed_spec_naming_an_unknown_agent(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = isolated / "unknown_agent"
    shutil.copytree(PROBLEM_DIR, problem, ignore=shutil.ignore_patterns("__pycache__"))
    seed = json.loads((problem / "seed.json").read_text())
    seed["steps"][0]["operation"]["agent_name"] = "gpt5_solver"
    (problem / "seed.json").write_text(json.dumps(seed))
    code = main(["search", str(problem), *SMALL])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert "$.steps[0].operation.agent_name: unknown agent 'gpt5_solver'" in line
    assert str(problem / "seed.json") in line


def test_zero_budget(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["search", "gsm8k_replay", "--max-evaluations", "0"])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert line == (
        "topology-studio: error: search: argument --max-evaluations: must be at least 1, got 0 "
        "(see 'topology-studio search --help')"
    )
    assert not (isolated / "runs.duckdb.journals").exists()  # nothing was started


def test_meta_agent_without_a_model(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["search", "gsm8k_replay", "--strategy", "meta-agent"])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert "the meta-agent strategy needs a designer model: give --meta-model" in line


def test_resume_of_an_unknown_run(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["search", "--resume", "20250101-000000-abcdef"])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert "no journal for run '20250101-000000-abcdef'" in line


def test_a_database_in_a_folder_that_cannot_exist(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    afile = isolated / "a_file"
    afile.write_text("")
    db = afile / "runs.duckdb"  # root may write anywhere, but never below a file
    code = main(["search", "gsm8k_replay", "--db", str(db), *SMALL])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert line == (
        f"topology-studio: error: cannot write the run journal {db}.journals/ under --db {db}: "
        f"[Errno 20] Not a directory: '{db}.journals' (give --db a path in a writable folder)"
    )


@pytest.mark.parametrize("flag", ["--minibatch-size", "--generations", "--concurrency"])
def test_a_zero_count_is_refused_before_a_run_starts(
    isolated: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    code = main(["search", "gsm8k_replay", flag, "0"])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert f"argument {flag}: must be at least 1, got 0" in line
    assert not (isolated / "runs.duckdb.journals").exists()  # no empty run left behind


def test_a_search_that_fails_before_it_starts_leaves_no_journal(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["search", "gsm8k_replay", "--strategy", "meta-agent", "--meta-model", "nosuch:model"]
    code = main([*argv, *SMALL])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert code == 2
    assert line.startswith(
        "topology-studio: error: designer model 'nosuch:model' cannot be built: Unknown model"
    )
    assert "journal" not in line
    journals = isolated / "runs.duckdb.journals"
    assert not journals.exists() or list(journals.iterdir()) == []


# ---- end to end through a subprocess ---------------------------------------------------------


def _cli(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "TOPOLOGY_STUDIO_DATASETS": DATASETS, **env}
    full_env.pop("TOPOLOGY_STUDIO_DB", None)
    return subprocess.run(
        [sys.executable, "-m", "studio.cli", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One small search through the command line, shared by the tests below."""
    work = tmp_path_factory.mktemp("cli_e2e")
    db = work / "runs.duckdb"
    proc = _cli(
        ["search", "gsm8k_replay", "--strategy", "evolutionary", *SMALL, "--db", str(db)],
        work,
        TOPOLOGY_STUDIO_CACHE=str(work / "cache"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    return {"work": work, "db": db, "stdout": proc.stdout, "run_id": kv(proc.stdout, "run")}


@pytest.mark.slow
def test_a_replayed_runs_cost_is_said_to_be_modelled(small_run: dict[str, Any]) -> None:
    """gsm8k_replay's agents replay recorded calls: its dollars are modelled, never spent, and
    the summary says so (a newcomer's first run otherwise reads as thousands of dollars)."""
    usd = store_usd(small_run["db"], small_run["run_id"])
    assert kv(small_run["stdout"], "cost_usd_total") == (
        f"{usd:.6f} USD modelled, no money spent (every model call of the run: search, "
        "re-scoring and held-out test; replayed recorded calls priced at the problem's "
        "[models.prices])"
    )


def store_usd(db: Path, run_id: str) -> float:
    with DuckDBRunStore(db, read_only=True) as store:
        run = store.get_run(run_id)
        assert run is not None and run.budget_used is not None
        return float(run.budget_used["usd"])


@pytest.mark.slow
def test_printed_front_is_what_the_store_holds(small_run: dict[str, Any]) -> None:
    stdout: str = small_run["stdout"]
    run_id: str = small_run["run_id"]
    table = section(stdout, "Pareto front (validation)")
    header, rows = table[0].split(), [r.split() for r in table[1:-2]]
    assert header == [
        "candidate", "accuracy", "cost_usd", "latency_ms", "n_agents", "depth", "error_rate",
        "score", "operator", "same_as", "best",
    ]  # fmt: skip
    assert table[-2] == (
        "(per problem, over the 20 validation problems: accuracy = share correct, cost_usd in "
        "USD, latency_ms in ms; score = 1*accuracy - 0.1*cost_usd - 1e-06*latency_ms (* = best "
        "score); on the front: no other candidate is at least as good on both accuracy and "
        "cost and better on one; same_as: front candidates with the same accuracy and cost "
        "(the row shows the smallest), not listed again)"
    )
    # this short run's five-objective front is its (accuracy, cost) front (checked below)
    assert table[-1] == (
        "the front over all five objectives (accuracy, cost_usd, latency_ms, n_agents, depth) "
        "holds no other candidate"
    )
    printed = [(*r[:8], r[9]) for r in rows]
    best_printed = [r[0] for r in rows if r[-1] == "*"]

    assert journal_path(small_run["db"], run_id).is_file()
    with DuckDBRunStore(small_run["db"]) as store:
        run = store.get_run(run_id)
        assert run is not None
        assert (run.problem, run.strategy, run.seed) == ("gsm8k_replay", "evolutionary", 1)
        archive = store.archive(run_id, split="validation", objectives=ACCURACY_COST)
        full = store.archive(run_id, split="validation")
        assert set(full[full["on_front"]]["candidate_idx"]) <= set(
            archive[archive["on_front"]]["candidate_idx"]
        )
        front = archive[archive["on_front"]].sort_values("candidate_idx")
        # one row per point (accuracy, cost): the best (else the smallest: fewest agents, then
        # depth, latency, index) candidate, the others listed in same_as
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for r in front.to_dict("records"):
            figures = (
                fmt_float(r["accuracy"], 4),
                fmt_float(r["cost_usd"], 6),
                fmt_float(r["latency_ms"], 1),
                str(int(r["n_agents"])),
                str(int(r["depth"])),
                fmt_float(r["error_rate"], 4),
                fmt_float(r["aggregate_score"], 4),
            )
            groups.setdefault(figures[:2], []).append({**r, "figures": figures})
        stored = []
        for members in groups.values():
            head = next(
                (m for m in members if m["is_best"]),
                min(
                    members,
                    key=lambda m: (m["n_agents"], m["depth"], m["latency_ms"], m["candidate_idx"]),
                ),
            )
            same = ",".join(str(int(m["candidate_idx"])) for m in members if m is not head)
            stored.append((str(int(head["candidate_idx"])), *head["figures"], same or "-"))
        stored.sort(key=lambda row: int(row[0]))
        best = archive[archive["is_best"]]
        assert printed == stored
        assert best_printed == [str(int(best.iloc[0]["candidate_idx"]))]
        test_line = next(x for x in stdout.splitlines() if x.startswith("held-out test:"))
        assert test_line.startswith(
            f"held-out test: accuracy {fmt_float(best.iloc[0]['test_accuracy'], 4)}, score "
        )
        best_idx = int(best.iloc[0]["candidate_idx"])
        spec_json = store.get_spec(str(best.iloc[0]["spec_hash"]))
    assert spec_json is not None
    best_section = section(stdout, f"Best topology (candidate {best_idx})")
    assert best_section[0].startswith(parse_topology(spec_json).node_kind + ": ")
    printed_spec = json.loads("\n".join(best_section[1 : best_section.index("}") + 1]))
    assert parse_topology(printed_spec) == parse_topology(spec_json)
    assert kv(stdout, "database") == str(small_run["db"])


@pytest.mark.slow
def test_runs_show_diff_and_apply_read_the_store(
    small_run: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = str(small_run["db"])
    run_id: str = small_run["run_id"]
    assert main(["runs", "--db", db]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["run", "problem", "strategy", "status"]
    assert out[1].split()[:3] == [run_id, "gsm8k_replay", "evolutionary"]

    assert main(["show", run_id[:-2], "--db", db]) == 0  # a unique prefix is enough
    shown = capsys.readouterr().out
    assert section(shown, "Pareto front (validation)") == section(
        small_run["stdout"], "Pareto front (validation)"
    )
    # the full front: the same rows on this run, a legend over all five objectives, no line
    # about more candidates
    assert main(["show", run_id, "--objectives", "all", "--db", db]) == 0
    full = section(capsys.readouterr().out, "Pareto front (validation)")
    assert full[:-1] == section(shown, "Pareto front (validation)")[:-2]
    assert full[-1] == (
        "(per problem, over the 20 validation problems: accuracy = share correct, cost_usd in "
        "USD, latency_ms in ms; score = 1*accuracy - 0.1*cost_usd - 1e-06*latency_ms (* = best "
        "score); on the front: no other candidate is at least as good on all of accuracy, "
        "cost, latency, n_agents and depth and better on one; same_as: front candidates with "
        "the same figures, not listed again)"
    )

    assert main(["diff", run_id, "1", "--db", db]) == 0
    diff = capsys.readouterr().out
    assert "== Structural diff: candidate 0 -> 1 ==" in diff
    assert "--- candidate 0" in diff
    assert "+++ candidate 1" in diff

    registry = tmp_path / "registry"
    assert main(["apply", run_id, "1", "--to", str(registry), "--db", db]) == 0
    dry = capsys.readouterr().out
    assert "dry run: nothing was written (add --yes to write it)" in dry
    assert TopologyRegistry(registry).names() == []

    argv = ["apply", run_id, "1", "--to", str(registry), "--db", db, "--yes", "--by", "alice"]
    assert main([*argv, "--comment", "cheaper"]) == 0
    done = capsys.readouterr().out
    assert f"written: {registry}/gsm8k_replay version 1 (approved by alice)" in done
    version, spec = TopologyRegistry(registry).current("gsm8k_replay")
    assert version == 1
    (record,) = TopologyRegistry(registry).history("gsm8k_replay")
    assert record.approval is not None
    assert (record.approval.by, record.approval.comment) == ("alice", "cheaper")
    with DuckDBRunStore(db) as store:
        proposals = store.list_proposals()
    assert list(proposals["who"]) == ["alice"]
    assert list(proposals["applied_version"]) == [1]
    assert main(argv) == 0
    assert "nothing to write" in capsys.readouterr().out
    assert spec.node_kind in ("pipeline", "parallel", "router", "refinement_loop")


@pytest.mark.slow
def test_apply_writes_to_the_studios_registry_by_default(
    small_run: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from studio.manager import REGISTRY_ENV, StudioManager

    monkeypatch.delenv(REGISTRY_ENV, raising=False)
    db = tmp_path / "copy.duckdb"
    shutil.copy(small_run["db"], db)
    run_id: str = small_run["run_id"]
    registry = tmp_path / "topologies"  # where the studio looks: beside the database
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # beside the database, not the current directory
    argv = ["apply", run_id, "1", "--db", str(db), "--yes", "--by", "bob"]
    assert main(argv) == 0
    done = capsys.readouterr().out
    assert f"written: {registry}/gsm8k_replay version 1 (approved by bob)" in done
    assert TopologyRegistry(registry).current_version("gsm8k_replay") == 1
    manager = StudioManager(db)
    try:
        assert manager.registry.root == registry
        assert manager.registry.current_version("gsm8k_replay") == 1
        # the store records the target the studio asks for (another test's proposal may be in
        # the copied database, under its own registry)
        proposals = manager.store.list_proposals(manager.registry_target("gsm8k_replay"))
        assert list(proposals["who"]) == ["bob"]
        assert list(proposals["applied_version"]) == [1]
    finally:
        manager.close()
    # $TOPOLOGY_STUDIO_REGISTRY wins, as in the studio
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv(REGISTRY_ENV, str(elsewhere))
    assert main(argv) == 0
    assert f"written: {elsewhere}/gsm8k_replay version 1" in capsys.readouterr().out


@pytest.mark.slow
def test_resume_continues_an_interrupted_run_to_the_same_front(
    small_run: dict[str, Any], tmp_path: Path
) -> None:
    """A run killed mid-way (its journal cut after the seed's evaluation) resumes to the same
    front as the uninterrupted run."""
    run_id: str = small_run["run_id"]
    lines = journal_path(small_run["db"], run_id).read_text().splitlines(keepends=True)
    cut = next(i for i, x in enumerate(lines) if '"type":"archive_snapshot"' in x) + 1
    db2 = tmp_path / "resumed.duckdb"
    target = journal_path(db2, run_id)
    target.parent.mkdir(parents=True)
    target.write_text("".join(lines[:cut]) + lines[cut][: len(lines[cut]) // 2])  # torn line
    proc = _cli(["search", "gsm8k_replay", "--resume", run_id, "--db", str(db2)], tmp_path,
                TOPOLOGY_STUDIO_CACHE=str(tmp_path / "cache"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"resuming run {run_id}" in proc.stderr

    def front(stdout: str) -> list[str]:
        # latency is model time (GSM8K's latency_source): the whole table is the same
        return section(stdout, "Pareto front (validation)")

    assert front(proc.stdout) == front(small_run["stdout"])


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_the_run_resumes(tmp_path: Path) -> None:
    import signal
    import time

    db = tmp_path / "runs.duckdb"
    env = {**os.environ, "TOPOLOGY_STUDIO_DATASETS": DATASETS}
    env["TOPOLOGY_STUDIO_CACHE"] = str(tmp_path / "cache")
    argv = ["search", "gsm8k_replay", "--seed", "1", "--max-evaluations", "40", "--no-test",
            "--minibatch-size", "5", "--set", "gold.validation_size=40", "--db", str(db)]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "studio.cli", *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    journals = Path(f"{db}.journals")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait for the seed's evaluation to be journalled
        found = list(journals.glob("*.jsonl")) if journals.is_dir() else []
        if found and '"type":"archive_snapshot"' in found[0].read_text():
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    run_id = kv(out, "run")
    assert kv(out, "status") == "stopped (SIGINT)"
    assert err.splitlines()[-1] == (
        f"interrupted: continue with 'topology-studio search gsm8k_replay --resume {run_id} --db {db}'"
    )
    events = [json.loads(x) for x in journal_path(db, run_id).read_text().splitlines()]
    assert events[-1]["type"] == "run_finished"
    assert (events[-1]["status"], events[-1]["reason"]) == ("stopped", "SIGINT")
    resumed = _cli(["search", "gsm8k_replay", "--resume", run_id, "--db", str(db)], tmp_path,
                   TOPOLOGY_STUDIO_CACHE=str(tmp_path / "cache"))  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert kv(resumed.stdout, "status") == "stopped (max_evaluations reached (40))"


_HOLDER = """
import sys
from core.storage import DuckDBRunStore
store = DuckDBRunStore(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
store.close()
"""


@pytest.mark.slow
def test_a_search_while_another_process_holds_the_database(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The studio holds the database: the journal alone records the run, and the summary is
    read from the journals; the holder sees every result once it ingests."""
    db = isolated / "held.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        code = main(["search", "gsm8k_replay", *SMALL, "--no-test", "--db", str(db)])
        cap = capsys.readouterr()
        assert code == 0, cap.err
        assert "Traceback" not in cap.err
        assert f"note: {db} is held by another process (the studio?)" in cap.err
        run_id = kv(cap.out, "run")
        assert section(cap.out, "Pareto front (validation)")[1:]  # at least the seed
        assert "held-out test: not evaluated" in cap.out
        assert main(["runs", "--db", str(db)]) == 0
        listed = capsys.readouterr()
        assert "answering from the run journals" in listed.err
        assert listed.out.splitlines()[1].split()[0] == run_id
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
        if holder.stdout is not None:
            holder.stdout.close()
    with DuckDBRunStore(db) as store:  # the next owner ingests the journal: nothing lost
        run = store.get_run(run_id)
    assert run is not None
    assert run.status == "stopped"


def test_evaluate_prints_one_row_per_example(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from core.problems import load_problem

    spec_file = isolated / "seed.json"
    shutil.copy(PROBLEM_DIR / "seed.json", spec_file)
    code = main(["evaluate", "gsm8k_replay", str(spec_file), "--limit", "3", "--time-scale", "0"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    table = section(cap.out, "validation: 3 examples")
    assert table[0].split() == [
        "example", "trial", "accuracy", "cost_usd", "latency_ms", "status", "output",
    ]  # fmt: skip
    rows = [r.split() for r in table[1:4]]
    ids = [e.id for e in load_problem("gsm8k_replay").splits["validation"][:3]]
    assert [r[0] for r in rows] == ids
    assert [r[5] for r in rows] == ["ok", "ok", "ok"]
    mean = sum(float(r[2]) for r in rows) / 3
    assert kv(cap.out, "accuracy") == fmt_float(mean, 4)
    assert kv(cap.out, "status") == "ok"
    assert cap.out.splitlines()[0] == "pipeline: 175b_finetuning (n_agents=1, depth=1, nodes=2)"


def test_evaluate_a_function_only_spec_is_degenerate_with_zero_latency(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # what mutate:remove_step makes of the seed: no agent, so no answer (blank, F5) and no
    # model time; evaluate must use the problem's blank test and latency source like a search
    spec_file = isolated / "functions.json"
    spec_file.write_text(
        '{"kind": "pipeline", "steps": [{"operation": {"kind": "function_step", '
        '"callable_name": "extract_final_answer"}}]}'
    )
    for _ in range(2):
        code = main(["evaluate", "gsm8k_replay", str(spec_file), "--limit", "3"])
        cap = capsys.readouterr()
        assert code == 1, cap.err
        rows = [r.split()[:6] for r in section(cap.out, "validation: 3 examples")[1:4]]
        assert [r[2:6] for r in rows] == [["0.0000", "0.000000", "0.0", "degenerate"]] * 3
        assert kv(cap.out, "status") == (
            "degenerate (100% blank or failed runs (3 blank, 0 error of 3; threshold 50%))"
        )
        assert kv(cap.out, "latency_ms_per_example") == "0.0"
        assert kv(cap.out, "blank_rate") == "1.0000"


def test_evaluate_refuses_a_spec_with_unknown_names(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec_file = isolated / "bad.json"
    spec_file.write_text(
        '{"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", '
        '"agent_name": "nope"}}]}'
    )
    code = main(["evaluate", "gsm8k_replay", str(spec_file)])
    cap = capsys.readouterr()
    line = _one_error_line(code, cap.out, cap.err)
    assert "$.steps[0].operation.agent_name: unknown agent 'nope'" in line


@pytest.mark.slow
def test_demo_without_ui_checks_data_and_runs_a_short_search(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["demo", "--no-ui"])
    cap = capsys.readouterr()
    assert code == 0, cap.err
    assert "Traceback" not in cap.err
    data = section(cap.out, "Data")
    assert data[0] == (
        "gsm8k_replay: OK (validation 100, test 919, train 300 examples; checksums verified; "
        f"cached in {isolated / 'cache' / 'datasets'})"
    )
    assert data[1] == (
        "the demo's short search: validation 100, held-out test 100 of 919 (the full search "
        "below uses the problem's own splits)"
    )
    assert kv(cap.out, "status") == "stopped (max_evaluations reached (10))"
    assert kv(cap.out, "full search") == (
        f"topology-studio search gsm8k_replay --seed 1 --db {isolated / 'runs.duckdb'}   "
        "(48 candidates, 1-3 minutes on 2 cores: finds ensembles and cascades)"
    )
    assert any(x.startswith("held-out test: accuracy ") for x in cap.out.splitlines())
    run_id = kv(cap.out, "run")
    assert kv(cap.out, "cost_usd_total").split(" (")[0].endswith(" USD modelled, no money spent")
    with DuckDBRunStore(isolated / "runs.duckdb") as store:
        run = store.get_run(run_id)
        assert run is not None
        assert (run.config["n_validation"], run.config["n_test"]) == (100, 100)


_BLANK_REGISTRIES = """
from core.evaluation.metrics import GoldExample
from core.hydrate import AgentRegistry, CallableRegistry
from core.problems import ProblemContext, ProblemParts


def blank(_: object) -> str:
    return ""


def build(ctx: ProblemContext) -> ProblemParts:
    callables = CallableRegistry()
    callables.register("blank", blank, "Answers nothing.")
    return ProblemParts(
        callable_registry=callables,
        agent_registry=AgentRegistry(),
        score_functions={"exact": lambda output, ex: float(output == ex.expected)},
        load_gold=lambda: [GoldExample(input=str(i), expected=str(i), id=f"q{i}") for i in range(6)],
        roles={"step": ["blank"]},
    )
"""


def test_a_search_that_fails_exits_1_with_its_reason(
    isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    problem = isolated / "blank_problem"
    problem.mkdir()
    (problem / "problem.toml").write_text(
        'name = "blank_problem"\n[gold]\nvalidation_size = 4\n[search]\nmax_evaluations = 3\n'
    )
    (problem / "registries.py").write_text(_BLANK_REGISTRIES)
    (problem / "seed.json").write_text(
        '{"kind": "pipeline", "steps": [{"operation": {"kind": "function_step", '
        '"callable_name": "blank"}}]}'
    )
    code = main(["search", str(problem)])
    cap = capsys.readouterr()
    assert code == 1
    assert cap.out == ""
    assert "Traceback" not in cap.err
    first = cap.err.splitlines()[0]
    assert first.startswith("topology-studio: error: ")
    assert "degenerate" in first
    assert "failed; its journal: " in first
