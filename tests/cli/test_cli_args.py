"""The command line's shell: argument errors are one line and exit 2, never a traceback."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from studio.cli import main
from studio.cli._common import DEFAULT_DB, parse_overrides, resolve_db_path
from studio.cli._output import Output, one_line
from studio.cli.studio import free_port, studio_command


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["bogus"], "argument COMMAND: invalid choice: 'bogus'"),
        (["search"], "search: give a PROBLEM (and --resume RUN to continue a run of it)"),
        (["search", "gsm8k_replay", "--seed", "x"], "search: argument --seed: invalid int"),
        (
            ["search", "p", "--max-evaluations", "-1"],
            "--max-evaluations: must be at least 1, got -1",
        ),
        (
            ["search", "p", "--max-usd", "nan"],
            "--max-usd: must be a finite number above 0, got nan",
        ),
        (["search", "p", "--strategy", "genetic"], "argument --strategy: invalid choice"),
        (["search", "p", "--set", "novalue"], "--set expects FIELD=VALUE, got 'novalue'"),
        (["diff", "r1", "x"], "diff: argument CANDIDATE: not a whole number: 'x'"),
        (["apply", "r1"], "the following arguments are required: CANDIDATE"),
        (["studio", "--port", "70000"], "a port is 1-65535, got 70000"),
        (["evaluate", "p"], "the following arguments are required: SPEC.json"),
    ],
)
def test_argument_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("topology-studio: error: ")
    assert message in lines[0]
    assert "Traceback" not in err


def test_no_command_prints_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys)
    assert code == 2
    assert out.startswith("usage: topology-studio")
    assert err == ""


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "search", "--help")
    assert code == 0
    assert "--strategy {evolutionary,exhaustive,meta-agent,random}" in out
    assert "--meta-model PROVIDER:MODEL" in out


def test_apply_help_says_where_it_writes_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "apply", "--help")
    assert code == 0
    text = " ".join(out.split())
    assert (
        "(default: the studio's registry: $TOPOLOGY_STUDIO_REGISTRY, else topologies/ beside "
        "the run database)"
    ) in text


def test_missing_database_is_one_clear_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "none.duckdb"
    for argv in (["runs", "--db", str(db)], ["--db", str(db), "show", "r1"]):
        code, out, err = _run(capsys, *argv)
        assert code == 2
        assert out == ""
        assert err == (
            f"topology-studio: error: no run database at {db}: run 'topology-studio search "
            "PROBLEM' first, or point --db (or $TOPOLOGY_STUDIO_DB) at one\n"
        )


def test_db_path_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOPOLOGY_STUDIO_DB", raising=False)
    assert resolve_db_path(None) == DEFAULT_DB == Path("data/runs.duckdb")
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", "/x/env.duckdb")
    assert resolve_db_path(None) == Path("/x/env.duckdb")
    assert resolve_db_path("/y/flag.duckdb") == Path("/y/flag.duckdb")


def test_overrides_are_read_as_toml_values() -> None:
    assert parse_overrides(
        [
            "gold.validation_size=50",
            "search.strategy=random",
            "a.b=true",
            'c="x y"',
            "d=1.5",
            "e=[1, 2]",
            "u=http://127.0.0.1:9/{file}",
        ]
    ) == {
        "gold.validation_size": 50,
        "search.strategy": "random",
        "a.b": True,
        "c": "x y",
        "d": 1.5,
        "e": [1, 2],
        "u": "http://127.0.0.1:9/{file}",
    }


def test_one_line_joins_a_multi_line_message() -> None:
    text = (
        "dataset 'gsm8k' file 'test.jsonl' is not available.\nLooked in:\n  - /a: not found\n"
        "  - download http://x: failed\nSet TOPOLOGY_STUDIO_DATASETS to a directory."
    )
    assert one_line(text) == (
        "dataset 'gsm8k' file 'test.jsonl' is not available. Looked in: /a: not found; "
        "download http://x: failed. Set TOPOLOGY_STUDIO_DATASETS to a directory."
    )


def test_plain_tables_are_two_space_columns() -> None:
    import io

    buf = io.StringIO()
    out = Output(buf, io.StringIO())
    assert out.rich is False
    out.table(("a", "long_name", "c"), [[1, None, "x"], ["22", "y", "zz"]])
    assert buf.getvalue() == "a   long_name  c\n1   -          x\n22  y          zz\n"


def test_studio_command_binds_loopback_headless() -> None:
    cmd = studio_command(8765)
    assert cmd[1:4] == ["-m", "streamlit", "run"]
    assert cmd[4].endswith("studio/server.py")
    joined = " ".join(cmd[5:])
    assert "--server.address 127.0.0.1" in joined
    assert "--server.headless true" in joined
    assert "--server.port 8765" in joined
    # the settings of .streamlit/config.toml travel with the command (any working directory)
    assert "--server.fileWatcherType none" in joined
    assert "--client.showErrorDetails none" in joined


def test_free_port_skips_a_taken_preferred_port() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        taken = s.getsockname()[1]
        port = free_port(taken)
        assert port != taken
        assert 1 <= port <= 65535


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_studio_serves_on_loopback_and_stops_with_its_child(tmp_path: Path, sig: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    port = free_port(None)
    env = {**os.environ, "TOPOLOGY_STUDIO_DB": str(tmp_path / "runs.duckdb")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "studio.cli", "studio", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0,  # its own group: a runner's signals never reach it by accident
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # even under nohup
    )
    try:
        deadline = time.monotonic() + 90
        health = ""
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/_stcore/health", timeout=2
                ) as r:
                    health = r.read().decode()
                    break
            except OSError:
                time.sleep(0.5)
        assert health == "ok"
        proc.send_signal(getattr(signal, sig))
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out.startswith(f"Studio: http://127.0.0.1:{port}")
    assert "Traceback" not in err
    # the Streamlit child is gone too: the port is free again
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            if s.connect_ex(("127.0.0.1", port)) != 0:
                break
        time.sleep(0.2)
    else:
        raise AssertionError(f"port {port} still served after the studio stopped")


def test_front_rows_group_candidates_with_the_same_figures() -> None:
    import pandas as pd

    from studio.cli._report import front_legend, front_table

    def row(idx: int, acc: float, best: bool = False, on_front: bool = True) -> dict[str, object]:
        return {
            "candidate_idx": idx, "accuracy": acc, "cost_usd": 0.01, "latency_ms": 100.0,
            "n_agents": 1, "depth": 1, "aggregate_score": acc - 0.001, "operator": "seed",
            "is_best": best, "on_front": on_front, "error_rate": 0.0 if idx != 7 else 0.25,
        }  # fmt: skip

    archive = pd.DataFrame(
        [row(0, 0.5), row(3, 0.5, best=True), row(5, 0.5), row(7, 0.25), row(9, 0.1, False, False)]
    )
    assert front_table(archive) == [
        ["3", "0.5000", "0.010000", "100.0", "1", "1", "0.0000", "0.4990", "seed", "0,5", "*"],
        ["7", "0.2500", "0.010000", "100.0", "1", "1", "0.2500", "0.2490", "seed", "-", ""],
    ]
    weights = {"accuracy": 1.0, "cost_usd": -0.1, "latency_ms": -1e-06, "confidence": 0.1}
    assert front_legend(weights, 300) == (
        "per problem, over the 300 validation problems: accuracy = share correct, cost_usd in "
        "USD, latency_ms in ms; score = 1*accuracy - 0.1*cost_usd - 1e-06*latency_ms (* = best "
        "score); on the front: no other candidate is at least as good on all of accuracy, "
        "cost, latency, n_agents and depth and better on one; same_as: front candidates with "
        "the same figures, not listed again"
    )
    assert front_legend(None, None) == (
        "per problem, over the validation split: accuracy = share correct, cost_usd in USD, "
        "latency_ms in ms (* = best score); on the front: no other candidate is at least as "
        "good on all of accuracy, cost, latency, n_agents and depth and better on one; "
        "same_as: front candidates with the same figures, not listed again"
    )


def test_the_accuracy_cost_front_says_how_many_more_the_full_front_holds() -> None:
    import pandas as pd

    from studio.cli._report import ACCURACY_COST, front_legend, more_on_the_full_front

    def table(on_front: list[int]) -> pd.DataFrame:
        return pd.DataFrame([{"candidate_idx": i, "on_front": i in on_front} for i in range(6)])

    head = "the front over all five objectives (accuracy, cost_usd, latency_ms, n_agents, depth)"
    shown = table([0, 3])
    assert more_on_the_full_front(shown, table([0, 3])) == f"{head} holds no other candidate"
    assert more_on_the_full_front(shown, table([0, 3, 4])) == (
        f"{head} holds 1 more candidate: --objectives all lists them"
    )
    # a tie on accuracy and cost (both shown) that latency breaks: 1 is not on the full front
    assert more_on_the_full_front(table([0, 1, 3]), table([0, 2, 3, 5])) == (
        f"{head} holds 2 more candidates: --objectives all lists them"
    )
    assert front_legend(None, 300, objectives=ACCURACY_COST) == (
        "per problem, over the 300 validation problems: accuracy = share correct, cost_usd in "
        "USD, latency_ms in ms (* = best score); on the front: no other candidate is at least "
        "as good on both accuracy and cost and better on one; same_as: front candidates with "
        "the same accuracy and cost (the row shows the smallest), not listed again"
    )


def test_the_accuracy_cost_front_has_one_row_per_point_headed_by_the_smallest() -> None:
    from studio.cli._report import ACCURACY_COST, front_table

    def row(
        idx: int, agents: int, depth: int, latency: float, best: bool = False
    ) -> dict[str, object]:
        return {
            "candidate_idx": idx, "accuracy": 0.5, "cost_usd": 0.01, "latency_ms": latency,
            "n_agents": agents, "depth": depth, "aggregate_score": 0.49, "operator": "seed",
            "is_best": best, "on_front": True, "error_rate": 0.0,
        }  # fmt: skip

    # one point (0.5, $0.01) reached by four topologies: the row is the one with the fewest
    # agents, then the least depth (3 over 5: same agents, 3 is shallower; 2 has more agents)
    point = [row(2, 3, 1, 50.0), row(5, 1, 3, 90.0), row(3, 1, 2, 120.0), row(8, 1, 2, 120.0)]
    assert front_table(point, ACCURACY_COST) == [
        ["3", "0.5000", "0.010000", "120.0", "1", "2", "0.0000", "0.4900", "seed", "2,5,8", ""],
    ]
    # over all five objectives they are four points
    assert [r[0] for r in front_table(point)] == ["2", "3", "5"]
    # the run's best heads its point whatever its size
    point[0]["is_best"] = True
    assert front_table(point, ACCURACY_COST) == [
        ["2", "0.5000", "0.010000", "50.0", "3", "1", "0.0000", "0.4900", "seed", "3,5,8", "*"],
    ]


def test_a_cascade_reads_as_if_else() -> None:
    from core.ir import parse_topology
    from studio.cli._report import structure_line

    spec = parse_topology(
        {
            "kind": "router",
            "routes": [
                {
                    "name": "long",
                    "condition_name": "question_is_long",
                    "step": {"kind": "agent_step", "agent_name": "175b_finetuning"},
                }
            ],
            "fallback_step": {"kind": "agent_step", "agent_name": "175b_verification"},
        }
    )
    assert structure_line(spec) == (
        "router: route{if question_is_long: 175b_finetuning; else: 175b_verification} "
        "(n_agents=2, depth=1, nodes=3)"
    )


def test_the_cli_turns_off_pydantic_ais_banner_unless_the_user_set_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("PYDANTIC_AI_NO_BANNER", raising=False)
    assert main([]) == 2  # no command: the help, exit 2
    assert os.environ["PYDANTIC_AI_NO_BANNER"] == "1"
    monkeypatch.setenv("PYDANTIC_AI_NO_BANNER", "0")
    main([])
    assert os.environ["PYDANTIC_AI_NO_BANNER"] == "0"
    capsys.readouterr()
