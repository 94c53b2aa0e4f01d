"""`compare_selection`: candidates selected on the Live chart as a Compare deep link."""

from __future__ import annotations

from studio.views.compare import parse_item
from studio.views.links import COMPARE_MAX, compare_selection

RUN = "20250101-120000-abc123"


def test_fewer_than_two_distinct_candidates_give_no_link() -> None:
    assert compare_selection(RUN, []) is None
    assert compare_selection(RUN, [3]) is None
    assert compare_selection(RUN, [3, 3]) is None


def test_the_link_keeps_selection_order_and_reads_back_as_compare_items() -> None:
    sel = compare_selection(RUN, [7, 2, 7, 5])
    assert sel is not None
    assert sel.items == f"{RUN}:7,{RUN}:2,{RUN}:5"
    assert [parse_item(p) for p in sel.items.split(",")] == [(RUN, 7), (RUN, 2), (RUN, 5)]
    assert sel.label == "Compare selected (3)"
    assert sel.caption == "Selected on the chart: #7, #2, #5."


def test_past_four_the_first_four_selected_are_compared_and_said_so() -> None:
    assert COMPARE_MAX == 4
    sel = compare_selection(RUN, [9, 8, 1, 4, 6, 0])
    assert sel is not None
    assert sel.items == ",".join(f"{RUN}:{i}" for i in (9, 8, 1, 4))
    assert sel.label == "Compare selected (4)"
    assert sel.caption == (
        "Selected on the chart: #9, #8, #1, #4, #6, #0. Compare shows at most 4: the first 4 "
        "selected (#9, #8, #1, #4)."
    )
