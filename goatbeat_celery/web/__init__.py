"""A web dashboard for goatbeat: lease, schedules, history and lateness, with pause, resume,
run now, edit, create and remove. Needs celery-goatbeat's ``web`` extra
(``docs/getting-started.md#install``).

Served by ``celery -A proj goatbeat web``, or mounted in your own ASGI application::

    from starlette.routing import Mount
    from goatbeat_celery.api import Schedules
    from goatbeat_celery.web import WebSettings, create_app

    beat = create_app(Schedules.from_app(app), WebSettings(token=os.environ["BEAT_TOKEN"]))
    routes = [..., Mount("/beat", app=beat)]

Pages are rendered on the server (Jinja, autoescaped); no script runs and nothing is loaded
from outside the package. The same application serves the JSON API under ``/api/v1``
(:mod:`goatbeat_celery.web.api`, bearer tokens of its own). Every change goes through
:class:`~goatbeat_celery.api.Schedules`.
"""

from goatbeat_celery.web.app import create_app
from goatbeat_celery.web.security import WebSettings

__all__ = ["WebSettings", "create_app"]
