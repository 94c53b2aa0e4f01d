"""ASGI middleware for the studio's server (`studio/server.py`); no Streamlit calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

__all__ = ["BASE_URL_SCRIPT", "BackendBaseUrl"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BASE_URL_SCRIPT = (
    b"<script>window.__streamlit=Object.assign(window.__streamlit||{},"
    b'{BACKEND_BASE_URL:window.location.origin+"/"});</script>'
)
"""Set before the frontend's bundle runs: the server is at the site's root, whatever the page."""

_SERVER_PATHS = ("/_stcore/", "/static/", "/media/", "/component/", "/app/", "/favicon")


class BackendBaseUrl:
    """Insert `BASE_URL_SCRIPT` right after `<head>` in the app's HTML page.

    Only GET requests for a page (not `/_stcore/...`, `/static/...`, media or components) are
    touched: their `Accept-Encoding` is dropped so the HTML comes back uncompressed (it is a
    few KiB), the script is inserted and `Content-Length` set again. Any other response passes
    through byte for byte.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path") or "/")
        if (
            scope.get("type") != "http"
            or scope.get("method") != "GET"
            or path.startswith(_SERVER_PATHS)
        ):
            await self.app(scope, receive, send)
            return
        scope = dict(scope)
        scope["headers"] = [(k, v) for k, v in scope.get("headers", []) if k != b"accept-encoding"]
        start: Message | None = None
        chunks: list[bytes] = []

        async def wrapped(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                is_html = headers.get(b"content-type", b"").startswith(b"text/html")
                if not is_html or b"content-encoding" in headers:
                    await send(message)
                    return
                start = message
                return
            if start is None:  # not an HTML page: already streaming through
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = b"".join(chunks)
            if b"<head>" in body and BASE_URL_SCRIPT not in body:
                body = body.replace(b"<head>", b"<head>" + BASE_URL_SCRIPT, 1)
            headers = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body, "more_body": False})

        await self.app(scope, receive, wrapped)
