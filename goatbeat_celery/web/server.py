"""Serving the dashboard with uvicorn, as ``celery -A proj goatbeat web`` does."""

from __future__ import annotations

import uvicorn
from starlette.applications import Starlette

#: Where the dashboard listens unless ``--bind`` says otherwise: this host only.
DEFAULT_BIND = "127.0.0.1:8765"
DEFAULT_PORT = 8765


def serve(app: Starlette, host: str, port: int) -> None:
    """Serve ``app`` until interrupted (SIGINT or SIGTERM stop it cleanly)."""
    uvicorn.run(app, host=host, port=port, log_level="info", proxy_headers=False,
                server_header=False)
