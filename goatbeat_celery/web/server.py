"""Serving the dashboard with uvicorn, as ``celery -A proj goatbeat web`` does."""

from __future__ import annotations

import uvicorn
from starlette.applications import Starlette

#: The port of a ``--bind`` that names none. The ``--bind`` default itself (this host only) is
#: written in the command, which must show it in ``--help`` without the web extra installed.
DEFAULT_PORT = 8765


def serve(app: Starlette, host: str, port: int) -> None:
    """Serve ``app`` until interrupted (SIGINT or SIGTERM stop it cleanly)."""
    uvicorn.run(app, host=host, port=port, log_level="info", proxy_headers=False,
                server_header=False)
