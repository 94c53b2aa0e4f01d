"""The studio's Streamlit entry script: navigation over the pages in `pages/`.

Run it with `topology-studio studio` (which runs `streamlit run studio/app.py --server.address
127.0.0.1 --server.headless true`); the run database comes from `$TOPOLOGY_STUDIO_DB`.
"""

from __future__ import annotations

import streamlit as st

from studio._st_common import GRAPH_CSS, PAGE_KEY, PAGE_SPECS, VISIT_KEY, page

# No page_icon: Streamlit fetches a material-icon favicon from a font CDN, and the studio must
# need no network.
st.set_page_config(page_title="Topology Studio", layout="wide")
# graphs at their own size, scrolling sideways when wider than their column:
# shrunk to fit, a router candidate's graph had 7 px labels at 1000 px
st.html(GRAPH_CSS)
current = st.navigation([page(name) for name in PAGE_SPECS])
# each arrival on a page is a new visit: a page's notes about the link it was opened with (a bad
# ?run=) belong to that visit, not to every later one (see `pick_run`)
if st.session_state.get(PAGE_KEY) != current.url_path:
    st.session_state[PAGE_KEY] = current.url_path
    st.session_state[VISIT_KEY] = int(st.session_state.get(VISIT_KEY, 0)) + 1
current.run()
