"""Compare answers "which is better, and where": flips counted per split (they pooled validation and
test), a paired McNemar exact test with its p-value, deltas against a chosen baseline with the best
marked, pickers that show figures, and a "differences only" view of the specs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from core.ir import parse_topology, spec_hash
from core.search.events import ExampleEvaluated
from core.storage import DuckDBRunStore
from studio.views.compare import delta_table, flip_splits, mcnemar_exact_p, paired_test

REPO = Path(__file__).resolve().parents[2]
APP = str(REPO / "studio" / "app.py")
COMPARE = str(REPO / "pages" / "compare.py")

from conftest import RUN_ID, SPECS  # noqa: E402

# held-out test results: 1 right in #0 only, 7 right in #1 only, 2 both right
TEST_RIGHT = {0: [1, 0, 0, 0, 0, 0, 0, 0, 1, 1], 1: [0, 1, 1, 1, 1, 1, 1, 1, 1, 1]}


@pytest.mark.parametrize(
    ("b", "c", "p"),
    [(0, 0, 1.0), (0, 2, 0.5), (1, 7, 18 / 256), (10, 2, 158 / 4096), (3, 3, 1.0), (0, 25, 2 / 2**25)],
)  # fmt: skip
def test_mcnemar_exact_p_is_the_two_sided_binomial(b: int, c: int, p: float) -> None:
    # scipy.stats.binomtest(b, b + c, 0.5).pvalue gives the same (scipy is no dependency)
    assert mcnemar_exact_p(b, c) == pytest.approx(p, rel=1e-12)
    assert mcnemar_exact_p(c, b) == mcnemar_exact_p(b, c)


def test_delta_table_marks_the_best_and_signs_deltas() -> None:
    rows = [
        {"accuracy": 0.25, "cost_usd": 0.001, "latency_ms": 1000.0},
        {"accuracy": 0.60, "cost_usd": 0.5, "latency_ms": 9000.0},
    ]
    t = delta_table(rows, ["a", "b"], baseline=0)
    assert t.loc["accuracy"].tolist() == ["25.00% (baseline)", "60.00% (+35.00 pp) ★"]
    assert t.loc["cost_usd"].tolist() == ["$0.0010 (baseline) ★", "$0.5000 (+$0.4990)"]
    t = delta_table(rows, ["a", "b"], baseline=1)
    assert t.loc["latency_ms"].tolist() == ["1.00 s (-8,000 ms) ★", "9.00 s (baseline)"]


@pytest.fixture
def compare(studio_env: Path) -> Iterator[AppTest]:
    from studio._st_common import _manager

    seq = iter(range(50_000, 60_000))
    with DuckDBRunStore(studio_env) as store:
        store.record_events(
            ExampleEvaluated(
                run_id=RUN_ID, seq=next(seq), ts=1_735_732_900.0, candidate_idx=idx,
                spec_hash=spec_hash(parse_topology(SPECS[idx])), split="test",
                example_id=f"t{k}", accuracy=float(r), cost_usd=0.001, latency_ms=10.0,
                status="ok", output_summary=f"answer {r}",
            )
            for idx, rights in TEST_RIGHT.items()
            for k, r in enumerate(rights)
        )  # fmt: skip
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.query_params["items"] = f"{RUN_ID}:0,{RUN_ID}:1"
    at.switch_page(COMPARE)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    yield at
    _manager(str(studio_env.resolve())).close()
    _manager.clear()


def _tiles(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_flips_are_counted_per_split_with_a_paired_test(compare: AppTest) -> None:
    at = compare
    [split] = [r for r in at.radio if r.label == "Split"]
    assert split.options == ["validation", "test"]
    assert split.value == "validation"
    tiles = _tiles(at)
    # validation only: 4 examples (pooled with test it was 14)
    assert [tiles[k] for k in ("right in #0, wrong in #1", "wrong in #0, right in #1")] == [
        "0",
        "2",
    ]
    assert int(tiles["both right"]) + int(tiles["both wrong"]) == 2
    text = "\n".join(str(m.value) for m in at.markdown)
    assert "McNemar exact test on 4 paired examples: #1 is right on 2 more of the 2" in text
    assert "two-sided p = 0.5, not enough to call either better (p >= 0.05)." in text
    split.set_value("test").run()
    tiles = _tiles(at)
    assert [tiles[k] for k in ("right in #0, wrong in #1", "wrong in #0, right in #1")] == [
        "1",
        "7",
    ]
    assert tiles["both right"] == "2" and tiles["both wrong"] == "0"
    text = "\n".join(str(m.value) for m in at.markdown)
    assert "McNemar exact test on 10 paired examples" in text
    assert "two-sided p = 0.07031," in text
    flips = [d.value for d in at.dataframe if "change" in d.value.columns][0]
    assert set(flips["split"]) == {"test"} and len(flips) == 8


def test_deltas_pickers_and_differences_only(compare: AppTest) -> None:
    at = compare
    [box] = [s for s in at.selectbox if s.label == "Candidate 2"]
    assert "#1: 60.00%, $0.5000" in box.options
    deltas = [
        d.value
        for d in at.dataframe
        if "accuracy" in d.value.index and "(baseline)" in "".join(d.value.iloc[:, 0])
    ]
    assert deltas and deltas[0].loc["accuracy"].tolist() == [
        "25.00% (baseline)",
        "60.00% (+35.00 pp) ★",
    ]
    at.toggle(key="cmp_diff_only").set_value(True).run()
    [code] = [c.value for c in at.code if "@@" in str(c.value)]
    assert '-        "agent_name": "6b_finetuning",' in code
    assert '+        "agent_name": "175b_verification",' in code
    assert '"id"' not in code


def test_flip_splits_leave_out_a_split_only_one_side_has() -> None:
    import pandas as pd

    flips = pd.DataFrame(
        {
            "split": ["test", "validation", "minibatch"],
            "change": ["both_right", "wrong_to_right", "only_a"],
        }
    )
    assert flip_splits(flips) == ["validation", "test"]
    assert paired_test({"right_to_wrong": 0, "wrong_to_right": 0}).p_value == 1.0
