"""Websocket routes of every app, collected in one place."""

from django.urls import path

from annotation.consumers import AnnotationSessionConsumer
from rl_control.consumers import RunConsumer
from webapp.fleet.consumers import FleetConsumer
from webapp.store.consumers import ExportJobConsumer

websocket_urlpatterns = [
    path("ws/export-jobs/<int:job_id>/", ExportJobConsumer.as_asgi()),
    path("ws/rl/runs/<int:run_id>/", RunConsumer.as_asgi()),
    path("ws/annotation/sessions/<int:session_id>/", AnnotationSessionConsumer.as_asgi()),
    path("ws/fleet/", FleetConsumer.as_asgi()),
]
