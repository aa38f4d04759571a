"""The package's stylesheet, served as a page is: the dashboard routes it through the same
``Host`` check and security headers as every page. It needs no sign-in (the sign-in page uses
it) and holds nothing of the deployment."""

from __future__ import annotations

from pathlib import Path

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.staticfiles import StaticFiles

FILES = StaticFiles(directory=Path(__file__).parent / "static")
#: The dashboard's icon: the pages link it, and ``/favicon.ico`` answers with it.
ICON = "favicon.svg"


async def static_file(request: Request, _context: object) -> Response:
    """The file the path names under ``static/``, or a plain 404 (never a file elsewhere)."""
    try:
        response = await FILES.get_response(request.path_params["path"], request.scope)
    except HTTPException as exc:
        return PlainTextResponse(exc.detail, status_code=exc.status_code)
    # Revalidated by its ETag rather than stored blindly: it changes with the package.
    response.headers["Cache-Control"] = "no-cache"
    return response


async def favicon(request: Request, context: object) -> Response:
    """``/favicon.ico``, which browsers ask for whatever the page says: the icon of
    ``static/favicon.svg``, served as the stylesheet is."""
    request.scope["path_params"] = {"path": ICON}
    return await static_file(request, context)
