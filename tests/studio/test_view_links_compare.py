"""`compare_selection` and `table_pick`: candidates selected on the Live chart or in its archive
table as a Compare deep link."""

from __future__ import annotations

from studio.views.compare import parse_item
from studio.views.links import COMPARE_MAX, TablePick, compare_selection, table_pick

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


ORDER = [4, 0, 9, 2, 7]  # the candidate of each table row, as shown


def test_one_selected_row_inspects_its_candidate_unless_it_is_inspected_already() -> None:
    assert table_pick(RUN, [2], ORDER, inspected=4) == TablePick(inspect=9, compare=None)
    assert table_pick(RUN, [2], ORDER, inspected=None) == TablePick(inspect=9, compare=None)
    assert table_pick(RUN, [0], ORDER, inspected=4) == TablePick(inspect=None, compare=None)
    assert table_pick(RUN, [], ORDER, inspected=4) == TablePick(inspect=None, compare=None)


def test_several_rows_keep_the_inspector_and_link_to_compare_in_row_order() -> None:
    pick = table_pick(RUN, [3, 0, 2], ORDER, inspected=4)
    assert pick.inspect is None
    assert pick.compare is not None
    assert pick.compare.items == f"{RUN}:4,{RUN}:9,{RUN}:2"
    assert pick.compare.label == "Compare selected (3)"
    assert pick.compare.caption == "Selected in the table: #4, #9, #2."


def test_rows_past_the_end_of_a_shortened_table_are_ignored() -> None:
    assert table_pick(RUN, [1, 5, 9], ORDER, inspected=4) == TablePick(inspect=0, compare=None)
    pick = table_pick(RUN, [4, 1, 6], ORDER, inspected=None)
    assert pick.compare is not None
    assert pick.compare.items == f"{RUN}:0,{RUN}:7"
