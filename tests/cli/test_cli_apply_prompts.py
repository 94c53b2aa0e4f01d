"""`apply RUN CANDIDATE` on a phase-2 (prompt) run (both parts applied through one reviewed diff):
the topology part (the search's winner) and the prompt part (each evolved prompt's word diff) are
shown, and written together (default) or one without the other (`--only`), in one all-or-nothing
write."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.ir import TopologySpec, parse_topology, spec_hash
from core.search.events import CandidateProposed, RunFinished, RunStarted, SearchEvent
from core.search.registry import Approval, TopologyRegistry
from core.storage import DuckDBRunStore
from studio.cli import main

SEARCH = "20250101-120000-aaaaaa"
PHASE2 = "20250101-130000-bbbbbb"
GENES = ["critic.system_prompt", "judge.system_prompt"]


def _spec(*, judge: bool = True, critic: str = "Find the flaw.") -> TopologySpec:
    steps: list[dict[str, object]] = [
        {
            "operation": {
                "kind": "agent_step",
                "id": "critique",
                "inline_spec": {
                    "name": "critic",
                    "system_prompt": critic,
                    "output_schema": {"type": "string"},
                },
            }
        }
    ]
    if judge:
        steps.append(
            {
                "operation": {
                    "kind": "agent_step",
                    "id": "judge",
                    "inline_spec": {
                        "name": "judge",
                        "system_prompt": "Judge it.",
                        "output_schema": {"type": "string"},
                    },
                }
            }
        )
    return parse_topology({"kind": "pipeline", "id": "root", "steps": steps})


WINNER = _spec()
# candidate 1's prompts: the critic's evolved over two lines, the judge's unchanged
EVOLVED = "Find the flaw.\nAnswer in upper case."
THOUGHTS = (
    "critic.system_prompt: Find the flaw.\njudge.system_prompt: Judge it.",
    f"critic.system_prompt: {EVOLVED}\njudge.system_prompt: Judge it.",
)


def _events() -> list[SearchEvent]:
    t0 = 1_735_732_800.0
    text = WINNER.model_dump_json()
    ev: list[SearchEvent] = [
        RunStarted(run_id=SEARCH, seq=0, ts=t0, problem="letters", strategy="random", seed=1),
        RunFinished(run_id=SEARCH, seq=1, ts=t0 + 1, status="completed"),
        RunStarted(
            run_id=PHASE2,
            seq=0,
            ts=t0 + 2,
            problem="letters",
            strategy="gepa",
            seed=1,
            config={"phase": "prompts", "parent_run_id": SEARCH, "genes": GENES},
        ),
    ]
    for idx, thought in enumerate(THOUGHTS):
        ev.append(
            CandidateProposed(
                run_id=PHASE2,
                seq=len(ev) - 2,
                ts=t0 + len(ev),
                candidate_idx=idx,
                generation=idx - 1,
                spec_hash=f"{spec_hash(WINNER)}-p{idx}",
                spec_json=text,
                parent_idx=None if idx == 0 else 0,
                operator="seed" if idx == 0 else "gepa_reflection",
                thought=thought,
            )
        )
    ev.append(RunFinished(run_id=PHASE2, seq=3, ts=t0 + 9, status="completed"))
    return ev


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.duckdb"
    with DuckDBRunStore(path) as store:
        store.record_events(_events())
    return path


@pytest.fixture
def reg(tmp_path: Path) -> TopologyRegistry:
    """A registry whose `letters` v1 is the winner without its judge step."""
    registry = TopologyRegistry(tmp_path / "reg")
    registry.write("letters", _spec(judge=False), None, approval=Approval(by="ann"))
    return registry


def _apply(db: Path, reg: TopologyRegistry, *extra: str) -> list[str]:
    argv = ["apply", PHASE2, "1", "--db", str(db), "--to", str(reg.root), "--by", "bo", *extra]
    assert main(argv) == 0
    return []


def _section(out: str, heading: str) -> list[str]:
    """The lines under `== heading ==`, up to the next heading."""
    text = out.split(f"== {heading} ==\n", 1)[1]
    return text.split("\n== ", 1)[0].rstrip("\n").splitlines()


def test_a_dry_run_shows_the_topology_part_and_each_prompts_word_diff(
    db: Path, reg: TopologyRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    _apply(db, reg)
    out = capsys.readouterr().out
    assert (
        f"== Apply run {PHASE2} candidate 1 (topology and prompts) to {reg.root}/letters "
        "(version 1) =="
    ) in out
    topology = _section(out, "Topology part: the search's winner")
    assert [line.split() for line in topology] == [
        ["node", "change", "kind", "before", "after", "fields"],
        ["root", "changed", "pipeline", "$", "$", "steps"],
        ["judge", "added", "agent_step", "-", "$.steps[1].operation", "-"],
    ]
    assert _section(out, "Prompt part (word diff: [-removed-] {+added+})") == [
        "critic.system_prompt: Find the flaw. {+Answer in upper case.+}",
    ]  # the judge's prompt is candidate 0's: phase 2 did not change it
    # the written spec's JSON diff follows, without repeating the topology part's table
    written = _section(out, "Unified diff of what is written (JSON)")
    assert written[:2] == ["--- letters (current)", "+++ letters (new)"]
    assert written[-1] == "dry run: nothing was written (add --yes to write it)"
    prompt_lines = [line for line in written if '"system_prompt"' in line]
    assert prompt_lines == [
        '-          "system_prompt": "Find the flaw."',
        '+          "system_prompt": "Find the flaw.\\nAnswer in upper case."',
        '+          "system_prompt": "Judge it."',
    ]
    assert reg.current_version("letters") == 1


def test_yes_writes_both_parts_as_one_version(
    db: Path, reg: TopologyRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    _apply(db, reg, "--yes")
    out = capsys.readouterr().out
    assert f"written: {reg.root}/letters version 2 (approved by bo)" in out
    version, spec = reg.current("letters")
    assert version == 2
    assert spec == _spec(critic=EVOLVED)
    assert reg.history("letters")[-1].note == f"run {PHASE2} candidate 1 (topology and prompts)"
    with DuckDBRunStore(db) as store:
        (row,) = store.list_proposals().to_dict("records")
        stored = store.get_proposal(None, int(row["proposal_id"])).spec_json
    assert (row["run_id"], row["candidate_idx"], row["decision"], row["applied_version"]) == (
        PHASE2,
        1,
        "approved",
        2,
    )
    assert parse_topology(stored) == _spec(critic=EVOLVED)


def test_only_prompts_writes_them_into_the_current_topology(
    db: Path, reg: TopologyRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    _apply(db, reg, "--only", "prompts", "--yes")
    out = capsys.readouterr().out
    assert "Topology part" not in out
    assert _section(out, "Prompt part (word diff: [-removed-] {+added+})") == [
        "critic.system_prompt: Find the flaw. {+Answer in upper case.+}",
    ]  # the judge's prompt phase 2 kept is no change (and v1 has no judge to give it to)
    # v1's structure (no judge step), the critic's evolved prompt: the topology part rejected
    assert reg.current("letters") == (2, _spec(judge=False, critic=EVOLVED))
    assert reg.history("letters")[-1].note == (
        f"run {PHASE2} candidate 1 (prompts only (topology rejected))"
    )


def test_only_topology_writes_the_winner_with_its_starting_prompts(
    db: Path, reg: TopologyRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    _apply(db, reg, "--only", "topology", "--yes")
    out = capsys.readouterr().out
    assert "Prompt part" not in out
    assert reg.current("letters") == (2, WINNER)


def test_only_prompts_with_no_current_topology_is_refused_and_writes_nothing(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty"
    argv = ["apply", PHASE2, "1", "--db", str(db), "--to", str(empty), "--only", "prompts"]
    assert main([*argv, "--yes"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "topology-studio: error: the registry has no 'letters' to apply the prompts to: apply "
        "the topology part too (both)"
    ]
    assert TopologyRegistry(empty).names() == []


def test_only_on_a_topology_search_is_refused(
    db: Path, reg: TopologyRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["apply", SEARCH, "0", "--db", str(db), "--to", str(reg.root), "--only", "prompts"]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"topology-studio: error: --only is for a phase-2 (prompt) run; run {SEARCH} is a "
        "random run: apply it whole"
    ]


def test_the_starting_prompts_candidate_has_no_prompt_part_to_write(
    db: Path, reg: TopologyRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["apply", PHASE2, "0", "--db", str(db), "--to", str(reg.root), "--by", "bo", "--yes"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert _section(out, "Prompt part (word diff: [-removed-] {+added+})") == [
        "(phase 2 changed no prompt: candidate 0's starting prompts)"
    ]
    assert reg.current("letters") == (2, WINNER)
