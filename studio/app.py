"""The studio's Streamlit entry script: navigation over the pages in `pages/`.

Run it with `topology-studio studio` (which runs `streamlit run studio/app.py --server.address
127.0.0.1 --server.headless true`); the run database comes from `$TOPOLOGY_STUDIO_DB`.
"""

from __future__ import annotations

import streamlit as st

from studio._st_common import PAGE_SPECS, page

# No page_icon: Streamlit fetches a material-icon favicon from a font CDN, and the studio must
# need no network.
st.set_page_config(page_title="Topology Studio", layout="wide")
st.navigation([page(name) for name in PAGE_SPECS]).run()
