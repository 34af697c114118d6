"""The Django project: settings, ASGI/Channels routing, URLs, Celery app, and the shared apps
(`webapp.accounts` for roles, `webapp.store` for tasks, trajectories, checkpoints and export)."""

from webapp.celery import app as celery_app

__all__ = ["celery_app"]
