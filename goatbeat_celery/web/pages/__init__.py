"""The dashboard's pages, one module per concern, over what they share
(:mod:`~goatbeat_celery.web.pages.base`) and the one table answering goatbeat's errors
(:mod:`~goatbeat_celery.web.pages.errors`). :mod:`goatbeat_celery.web.app` routes to them."""
