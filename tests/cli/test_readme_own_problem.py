"""README "Bring your own problem" runs as written: its two commands on the files
`tools/example_tickets.py` writes print the (accuracy, cost) front the README shows."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
from cli_text import section

from core.ir import parse_topology
from core.storage.duckdb_store import DuckDBRunStore
from studio.cli import main
from studio.cli._output import fmt_float
from studio.cli._report import structure_line

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tools"))
import example_tickets  # noqa: E402  (a script of tools/, not a package)


def _readme_section() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("## Bring your own problem")
    return text[start : text.index("\n## ", start + 1)]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def _commands(block: str) -> list[list[str]]:
    joined = block.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_readme_commands_find_the_front_the_readme_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOPOLOGY_STUDIO_DB", str(tmp_path / "runs.duckdb"))
    monkeypatch.chdir(tmp_path)
    example_tickets.write(tmp_path)
    text = _readme_section()
    (commands,) = [b for b in _blocks(text, "bash")]
    init, search = _commands(commands)
    assert (init[:2], search) == (
        ["topology-studio", "init"],
        ["topology-studio", "search", "tickets"],
    )
    assert main(init[1:]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(search[1:]) == 0
    out = capsys.readouterr().out
    lines = section(out, "Pareto front (validation)")
    header = lines[0].split()
    printed = [
        (row[header.index("accuracy")], row[header.index("cost_usd")])
        for row in (line.split() for line in lines[1:])
        if row and re.fullmatch(r"[0-9]+", row[0])
    ]
    shown = [block for block in _blocks(text, "text") if block.startswith("accuracy")]
    (table,) = shown
    readme = [tuple(line.split()[:2]) for line in table.splitlines()[1:] if line.strip()]
    assert sorted(printed, key=lambda p: float(p[1])) == readme
    # the sentence under the table: `large` alone, as the store holds it
    with DuckDBRunStore(tmp_path / "runs.duckdb") as store:
        run_id = str(store.list_runs().iloc[0]["run_id"])
        archive = store.archive(run_id, split="validation")
        alone = [
            (fmt_float(r["accuracy"], 4), fmt_float(r["cost_usd"], 6))
            for r in archive.to_dict("records")
            if structure_line(parse_topology(store.get_spec(str(r["spec_hash"])) or "")).startswith(
                "pipeline: large ("
            )
        ]
    assert alone == [("0.9000", "0.000645")]
    assert "`large` alone (0.9000 at $0.000645)" in " ".join(text.split())
