"""Render helpers every studio page uses: the cached manager, error display, run picking.

This is the only studio module besides the pages that calls `st.*` (with `app.py`); view data
comes from `studio.views`, state from `studio.manager`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from core.errors import TopologyStudioError
from studio.manager import DB_ENV, StudioManager
from studio.views.tables import run_label

__all__ = [
    "DEFAULT_DB",
    "PAGES_DIR",
    "db_path",
    "get_manager",
    "guard",
    "PAGE_SPECS",
    "load_runs",
    "open_runs_page",
    "page",
    "pick_run",
    "show_error",
    "store_banner",
]

_log = logging.getLogger("studio")

PAGES_DIR = Path(__file__).resolve().parent.parent / "pages"
"""The studio's page files."""

DEFAULT_DB = Path("data") / "runs.duckdb"
"""The database when `$TOPOLOGY_STUDIO_DB` is not set (relative to the working directory)."""


PAGE_SPECS: dict[str, str] = {
    "runs": "Runs",
    "live": "Live search",
    "editor": "Topology editor",
    "compare": "Compare",
    "overlay": "Run overlay",
    "diff": "Diff & apply",
    "agents": "Agents",
    "runtime": "Runtime",
}
"""Page name (its file `pages/<name>.py` and URL path) -> title, in menu order. No icons: a
page's icon becomes the browser tab's icon, and Streamlit fetches material icons for that from
a font CDN, while the studio must need no network."""


GRAPH_CSS = (
    "<style>"
    '[data-testid="stGraphVizChart"] { overflow-x: auto; }'
    '[data-testid="stGraphVizChart"] > svg { max-width: none; flex-shrink: 0; }'
    "</style>"
)
"""Every page's style for topology graphs: drawn at their own size (Graphviz points), with a
horizontal scroll bar when wider than their column, never shrunk until unreadable."""

PAGE_KEY = "_studio_page"
"""Session-state key of the page shown last (its url path), set by `studio/app.py`."""
VISIT_KEY = "_studio_visit"
"""Session-state key of the count of page arrivals: a new visit each time the page changes."""


def page(name: str) -> st.Page:
    """The `st.Page` of `pages/<name>.py` (for `st.navigation`, `st.page_link`, `st.switch_page`)."""
    return st.Page(
        PAGES_DIR / f"{name}.py", title=PAGE_SPECS[name], url_path=name, default=name == "runs"
    )


def db_path() -> Path:
    """`$TOPOLOGY_STUDIO_DB`, else `data/runs.duckdb`, made absolute."""
    env = os.environ.get(DB_ENV, "").strip()
    return (Path(env).expanduser() if env else DEFAULT_DB).resolve()


@st.cache_resource(show_spinner=False)
def _manager(path: str) -> StudioManager:
    return StudioManager(path)


def get_manager() -> StudioManager:
    """The studio's one manager for the configured database (shared by every session)."""
    return _manager(str(db_path()))


def show_error(exc: BaseException) -> None:
    """Show an error in the page: the message of an engine error, a short line otherwise."""
    if isinstance(exc, TopologyStudioError | ValueError | KeyError | LookupError | OSError):
        text = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
        st.error(f"{type(exc).__name__}: {text}")
    else:
        _log.exception("unexpected error in the studio", exc_info=exc)
        st.error(
            f"Something went wrong ({type(exc).__name__}: {exc}). The details are in the "
            "studio's log."
        )


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """Show any error raised inside as an in-page message, never as a traceback.

    Streamlit's own control flow (`st.rerun`, `st.stop`, page switches) passes through.
    """
    try:
        yield
    except ScriptControlException:
        raise
    except Exception as exc:  # noqa: BLE001 (shown in the page)
        show_error(exc)


def store_banner(manager: StudioManager) -> None:
    """A warning while the store is the read-only journal view (the file is held elsewhere)."""
    with guard():
        manager.store  # noqa: B018 (opens the store, or falls back to the journals, now)
    note = manager.store_note
    if note:
        st.warning(note)


def load_runs(manager: StudioManager) -> pd.DataFrame:
    """Every run, newest first (`RunStore.list_runs`)."""
    return manager.store.list_runs()


def open_runs_page(title: str, empty: str) -> tuple[StudioManager, pd.DataFrame]:
    """The start of a page about recorded runs: its title, the store banner, every run.

    Stops the page with the note `empty` when there is no run (or the runs cannot be read:
    the error is shown above it).

    Returns:
        The manager and `load_runs(manager)` (not empty).
    """
    st.title(title)
    manager = get_manager()
    store_banner(manager)
    runs = None
    with guard():
        runs = load_runs(manager)
    if runs is None or runs.empty:
        st.info(empty)
        st.stop()
    return manager, runs


def pick_run(
    runs: pd.DataFrame,
    *,
    key: str,
    label: str = "Run",
    param: str | None = "run",
    search_states: dict[str, str] | None = None,
) -> str | None:
    """A run picker whose choice follows (and sets) the `run` query parameter.

    A deep link selects its run when the page first loads and whenever the URL's value changes
    from outside (a link, the address bar); otherwise the user's choice in the picker wins and
    is written to the URL. The URL value last seen is kept in `st.session_state[key + "_url"]`:
    re-applying an unchanged URL value on every rerun would undo the user's choice.

    Each run is labelled with its state in the status line's words (`run_label`, with
    `search_states`: run id -> the state of a search this studio runs, so a paused one says
    `paused`).

    Returns:
        The chosen run id, or None when there are no runs.
    """
    if runs.empty:
        return None
    ids = [str(r) for r in runs["run_id"].tolist()]
    states = search_states or {}
    labels = {
        str(r["run_id"]): run_label(r, states.get(str(r["run_id"])))
        for r in runs.to_dict("records")
    }
    seen_key = f"{key}_url"
    wanted = st.query_params.get(param) if param else None
    url_changed = wanted != st.session_state.get(seen_key)
    st.session_state[seen_key] = wanted
    if key not in st.session_state or (url_changed and wanted in ids):
        st.session_state[key] = wanted if wanted in ids else ids[0]
    if st.session_state[key] not in ids:
        st.session_state[key] = ids[0]
    visit = st.session_state.get(VISIT_KEY, 0)
    if url_changed and wanted and wanted not in ids:
        # a bad ?run= is said, not silently replaced
        st.session_state[f"{key}_bad"] = (str(wanted), st.session_state[key], visit)
    bad = st.session_state.get(f"{key}_bad")
    # said while this visit of the page still shows the run put in its place: not after the
    # user chose a run, followed another link or came back to the page later
    if bad is not None and (bad[0] in ids or bad[1] != st.session_state[key] or bad[2] != visit):
        st.session_state.pop(f"{key}_bad", None)
        bad = None
    if bad is not None:
        st.warning(f"No run {bad[0]!r} in this store: showing {bad[1]} instead.")
    shown = tuple(labels[i] for i in ids)
    if st.session_state.get(f"{key}_labels") != shown:
        # a label changed (a run ended, was paused): setting the value from the script makes
        # the browser draw the chosen run's label anew; it keeps the old text otherwise
        st.session_state[f"{key}_labels"] = shown
        st.session_state[key] = st.session_state[key]
    chosen = st.selectbox(
        label,
        ids,
        key=key,
        format_func=lambda r: str(labels.get(r, r)),
        on_change=lambda: st.session_state.pop(f"{key}_bad", None),
    )
    if param and chosen and wanted != chosen:
        st.query_params[param] = chosen
        st.session_state[seen_key] = chosen
    return str(chosen) if chosen is not None else None
