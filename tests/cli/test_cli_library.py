"""`library RUN --out lib.json` and `serve-topology PROBLEM --library lib.json` (the seed
library exported from a search, and the runtime designer serving requests from it) on a real small
gsm8k_replay search: the library file is the run's front, requests are served from it (a repeated
question is a cache hit), bad request lines are named by number and the good ones still served, and
the totals add up the per-request lines."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_text import kv, section

from core.problems import load_problem
from core.runtime_design.seed import load_library, seed_library_from_run
from core.storage import DuckDBRunStore
from studio.cli import library as cli_library
from studio.cli import main
from studio.cli.library import iter_requests

SMALL = [
    "--seed", "1", "--max-evaluations", "4", "--minibatch-size", "5",
    "--set", "gold.validation_size=10", "--time-scale", "0", "--no-test",
]  # fmt: skip


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A 4-evaluation search on gsm8k_replay (~5 s) and its library file."""
    work = tmp_path_factory.mktemp("library_cli")
    db = work / "runs.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TOPOLOGY_STUDIO_CACHE", str(work / "cache"))
        mp.chdir(work)
        assert main(["search", "gsm8k_replay", *SMALL, "--db", str(db)]) == 0
    with DuckDBRunStore(db) as store:
        run_id = str(store.list_runs()["run_id"].iloc[0])
    yield {"work": work, "db": db, "run_id": run_id}


def questions(n: int) -> list[str]:
    problem = load_problem("gsm8k_replay", overrides={"models.time_scale": 0})
    return [e.input.question for e in problem.splits["validation"][:n]]


def test_library_writes_the_runs_front(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "lib.json"
    capsys.readouterr()
    run_id: str = recorded["run_id"]
    code = main(["library", run_id[:-2], "--out", str(out_file), "--db", str(recorded["db"])])
    cap = capsys.readouterr()
    assert (code, cap.err) == (0, "")
    with DuckDBRunStore(recorded["db"]) as store:
        expected = seed_library_from_run(store, run_id)
    assert load_library(out_file) == expected
    assert json.loads(out_file.read_text())["run_id"] == run_id
    lines = cap.out.splitlines()
    assert [line.split()[:2] for line in lines[1:3]] == [["1", "candidate"], ["2", "candidate"]]
    assert lines[1].split()[4:] == ["0.4000", "0.007194", "3145.0"]
    assert lines[2].split()[5:] == ["0.7000", "1.458000", "6450.0"]
    assert lines[3] == (
        f"(run {run_id}: 2 entries of its validation front; per problem: accuracy = share "
        "correct, cost_usd in USD, latency_ms in ms)"
    )
    assert kv(cap.out, "library") == str(out_file)


def test_library_of_an_unknown_run_is_one_error_line(
    recorded: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(["library", "nope", "--out", str(tmp_path / "x.json"), "--db", str(recorded["db"])])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.err.startswith("topology-studio: error: no run 'nope' in the database")
    assert not (tmp_path / "x.json").exists()


@pytest.fixture(scope="module")
def library(recorded: dict[str, Any]) -> Path:
    path = Path(recorded["work"]) / "lib.json"
    assert (
        main(["library", recorded["run_id"], "--out", str(path), "--db", str(recorded["db"])]) == 0
    )
    return path


def serve(library: Path, requests: list[str], capsys: pytest.CaptureFixture[str], tmp: Path) -> Any:
    path = tmp / "requests.jsonl"
    path.write_text("\n".join(requests) + "\n")
    capsys.readouterr()
    argv = ["serve-topology", "gsm8k_replay", "--library", str(library), "--requests", str(path)]
    code = main([*argv, "--time-scale", "0"])
    return code, capsys.readouterr()


def test_serve_topology_picks_caches_and_totals(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = questions(3)
    requests = [
        json.dumps({"question": q[0]}),  # no limits: entry 2, the best accuracy
        json.dumps({"question": q[1], "budget_usd": 0.01}),  # only entry 1 is within
        json.dumps({"question": "  " + q[0].upper() + " "}),  # the same normalised goal: a hit
        json.dumps({"question": q[2], "latency_ms": 100}),  # none within: the cheapest
    ]
    code, cap = serve(library, requests, capsys, tmp_path)
    assert code == 0
    assert cap.err == (
        "requests line 3: error: PipelineStepError: pipeline 'pipeline': step 0 "
        "('175b_verification') failed after 1 attempt(s): NoRecordingError: no recorded "
        "175b_verification solution for the question '  JAMES DECIDES TO RUN 3 SPRINTS 3 TIMES "
        "A WEEK.  HE RUNS 60 METERS EACH SPRINT.…'\n"
    )
    table = cap.out.split("\n(per request")[0].splitlines()
    assert table[0].split() == [
        "line", "spec", "entry", "cache", "answer", "correct", "cost_usd", "latency_ms", "status",
    ]  # fmt: skip
    rows = [r.split() for r in table[1:]]
    # line 3 asks the same question upper-cased: the cache serves entry 2 again, but the
    # upper-cased text has no recording, so the run errors (and decays the entry)
    assert [(r[0], r[2], r[3], r[4], r[5], r[8]) for r in rows] == [
        ("1", "2", "miss", "540", "1", "ok"),
        ("2", "1", "miss", "260", "1", "ok"),
        ("3", "2", "hit", "-", "-", "error"),
        ("4", "1", "miss", "93", "0", "ok"),
    ]
    assert [(r[6], r[7]) for r in rows] == [
        ("0.648000", "2300.0"),
        ("0.004980", "1800.0"),
        ("0.000000", "0.0"),
        ("0.009180", "4650.0"),
    ]
    assert rows[0][1] == rows[2][1] != rows[1][1] == rows[3][1]
    totals = section(cap.out, "Totals")
    assert kv("\n".join(totals), "requests") == "4"
    assert kv("\n".join(totals), "cache_hit_rate") == "0.2500 (1 of 4)"
    assert kv("\n".join(totals), "scored") == "3 (questions with a gold answer)"
    served = kv("\n".join(totals), "served")
    # cost in total; latency the mean over the 3 requests that ran ok (line 3 errored: its 0 ms
    # would pull the mean down), the baseline over the same 3
    assert served == (
        f"accuracy {2 / 3:.4f} over 3 scored, cost ${0.648 + 0.00498 + 0.00918:.6f} in total, "
        f"latency {(2300 + 1800 + 4650) / 3:.1f} ms mean over the 3 that ran ok"
    )
    best = kv("\n".join(totals), "best_single (entry 2)")
    assert best == (
        f"accuracy 0.6667 over 3 scored, cost $3.972000 in total, latency {(2300 + 17000) / 3:.1f} "
        "ms mean over the 3 that ran ok"
    )


def test_bad_lines_are_named_and_the_good_ones_served(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = questions(1)
    requests = [
        "{not json",
        json.dumps({"question": q[0]}),
        json.dumps(["a list"]),
        "",
        json.dumps({"question": ""}),
        json.dumps({"question": q[0], "budget_usd": -1}),
        json.dumps({"question": q[0], "budget": 1}),
        json.dumps({"question": q[0], "latency_ms": "fast"}),
    ]
    code, cap = serve(library, requests, capsys, tmp_path)
    assert code == 2
    assert cap.err.splitlines() == [
        "topology-studio: error: requests line 1: not JSON (Expecting property name enclosed "
        "in double quotes at column 2)",
        "topology-studio: error: requests line 3: expected a JSON object, got list",
        'topology-studio: error: requests line 5: "question" must be a non-empty string',
        "topology-studio: error: requests line 6: budget_usd must be a finite number >= 0, got -1",
        "topology-studio: error: requests line 7: unknown field(s) budget (a request has "
        "question, budget_usd, latency_ms)",
        'topology-studio: error: requests line 8: latency_ms must be a number, got "fast"',
        "6 bad request line(s) skipped: 1, 3, 5, 6, 7, 8",
    ]
    rows = [r.split() for r in cap.out.split("\n(per request")[0].splitlines()[1:]]
    assert [(r[0], r[3], r[4], r[8]) for r in rows] == [("2", "miss", "540", "ok")]


def test_requests_from_standard_input(
    library: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    q = questions(1)
    lines = [json.dumps({"question": q[0]})] * 3
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(lines) + "\n"))
    capsys.readouterr()
    argv = ["serve-topology", "gsm8k_replay", "--library", str(library), "--time-scale", "0"]
    assert main(argv) == 0
    cap = capsys.readouterr()
    rows = [r.split() for r in cap.out.split("\n(per request")[0].splitlines()[1:]]
    assert [(r[0], r[3]) for r in rows] == [("1", "miss"), ("2", "hit"), ("3", "hit")]
    totals = "\n".join(section(cap.out, "Totals"))
    assert kv(totals, "cache_hit_rate") == "0.6667 (2 of 3)"
    # every request ran the best topology: served and the baseline agree exactly
    served, best = kv(totals, "served"), kv(totals, "best_single (entry 2)")
    assert (
        served
        == best
        == f"accuracy 1.0000 over 3 scored, cost ${3 * 0.648:.6f} in total, latency 2300.0 ms "
        "mean over the 3 that ran ok"
    )


def test_a_library_that_does_not_fit_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "lib.json"
    spec = {"kind": "pipeline", "steps": [{"operation": {"kind": "agent_step", "agent_name": "x"}}]}
    path.write_text(json.dumps([{"spec": spec, "accuracy": 0.5}]))
    capsys.readouterr()
    code = main(["serve-topology", "gsm8k_replay", "--library", str(path), "--requests", "-"])
    cap = capsys.readouterr()
    assert code == 2
    assert cap.err == (
        f"topology-studio: error: the library {path} does not fit gsm8k_replay: seed_library[0] "
        "names unregistered things ($.steps[0].operation.agent_name: unknown agent 'x')\n"
    )
    missing = tmp_path / "none.json"
    code = main(["serve-topology", "gsm8k_replay", "--library", str(missing)])
    assert code == 2
    assert capsys.readouterr().err.startswith(
        f"topology-studio: error: cannot read the library {missing}: "
    )


def test_requests_are_read_one_line_at_a_time() -> None:
    """A request is handed on as soon as its line is read: `serve-topology` on a terminal or a
    pipe does not wait for the end of its input (found by a newcomer: nothing came out until
    stdin closed)."""
    read: list[int] = []

    def lines() -> Iterator[str]:
        for n, text in enumerate(['{"question": "a"}', "not json", '{"question": "b"}'], 1):
            read.append(n)
            yield text

    errors: list[int] = []
    requests = iter_requests(lines(), lambda n, why: errors.append(n))
    first = next(requests)
    assert (first.line, first.question, read) == (1, "a", [1])
    assert [(r.line, r.question) for r in requests] == [(3, "b")]
    assert (read, errors) == ([1, 2, 3], [2])


def test_ctrl_c_prints_what_was_served_then_exits_130(
    library: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Found by a newcomer: Ctrl-C during serve-topology printed only 'interrupted', losing the
    requests already served. The first request is served for real, then Ctrl-C arrives."""
    real = cli_library.serve_requests

    async def one_then_ctrl_c(*args: Any, **kw: Any) -> Any:
        requests = iter(args[2])
        await real(args[0], args[1], [next(requests)], **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli_library, "serve_requests", one_then_ctrl_c)
    q = questions(2)
    code, cap = serve(library, [json.dumps({"question": x}) for x in q], capsys, tmp_path)
    assert code == 130
    rows = [r.split() for r in cap.out.split("\n(per request")[0].splitlines()[1:]]
    assert [(r[0], r[3], r[8]) for r in rows] == [("1", "miss", "ok")]
    assert kv("\n".join(section(cap.out, "Totals")), "requests") == "1"
    assert cap.err.splitlines() == [
        "topology-studio: error: interrupted",
        "interrupted after 1 request(s), printed above; the rest were not served",
    ]


def test_no_request_says_nothing_was_served(
    library: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, cap = serve(library, [""], capsys, tmp_path)
    assert code == 0
    assert section(cap.out, "Totals") == ["requests: 0 (nothing served)"]


def test_the_library_may_be_named_by_its_run(
    recorded: dict[str, Any],
    library: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`serve-topology PROBLEM --library RUN` (the form that names a run, not a library file): the
    run's validated front, served exactly as the library file written from it."""
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps({"question": questions(1)[0]}) + "\n")
    argv = ["serve-topology", "gsm8k_replay", "--requests", str(path), "--time-scale", "0"]
    capsys.readouterr()
    assert main([*argv, "--library", str(library)]) == 0
    by_file = capsys.readouterr().out
    run_id: str = recorded["run_id"]
    assert main([*argv, "--library", run_id[:-2], "--db", str(recorded["db"])]) == 0
    by_run = capsys.readouterr().out
    assert by_run.split("== Totals")[0] == by_file.split("== Totals")[0]
    assert main([*argv, "--library", "nosuchrun", "--db", str(recorded["db"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "topology-studio: error: --library nosuchrun: no such file, and no run 'nosuchrun' in "
        "the database (recent runs: "
    )
