"""Celery app: one queue per kind of work (env, rollout, train, asr.live, asr, export, default)."""

from __future__ import annotations

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings.dev")

app = Celery("flywheel")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = [
    Queue(name) for name in ("default", "env", "rollout", "train", "asr.live", "asr", "export")
]
app.conf.task_routes = {
    "webapp.store.tasks.osworld_task_check": {"queue": "default"},  # exact names win over patterns
    "webapp.store.tasks.*": {"queue": "export"},
    "annotation.tasks.transcribe_*": {"queue": "asr"},
    "rl_control.tasks.rollout_*": {"queue": "rollout"},
    "rl_control.tasks.train_*": {"queue": "train"},
    "webapp.fleet.tasks.*": {"queue": "env"},
}
app.autodiscover_tasks(
    ["webapp.store", "webapp.fleet", "annotation", "annotation.review", "rl_control", "webapp.flywheel"]
)
