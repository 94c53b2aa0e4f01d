"""The studio's server entry: the Streamlit app of `app.py`, served with one middleware that
tells the browser where the server is.

Streamlit's frontend finds its server by probing base paths derived from the page's URL: on
`/live` it asks `/live/_stcore/health` and `/live/_stcore/host-config` first (two 404s in the
console on every page load; streamlit/streamlit#7074) and then `/`. `window.__streamlit =
{BACKEND_BASE_URL: ...}`, set before the frontend's bundle loads, makes `/` the only base it
tries. `BackendBaseUrl` writes that line into the app's HTML page; nothing else changes.

Run with `streamlit run studio/server.py` (what `topology-studio studio` does); `studio/app.py`
stays the script (and what `AppTest` drives).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware

from studio._asgi import BackendBaseUrl

app = st.App(Path(__file__).with_name("app.py"), middleware=[Middleware(BackendBaseUrl)])
