"""The RL app's page of one run (its route in `urlpatterns`, included by project/urls.py); its data
and stream come from the run API and websocket."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from rl_control.models import Run
from webapp.pages.access import page_view


@page_view("runs")
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """The live page of one run."""
    if not Run.objects.filter(pk=run_id).exists():
        raise Http404("No such run.")
    return render(request, "pages/runs.html", {"view": "run", "run_id": run_id, "title": f"Run {run_id}"})


urlpatterns = [path("runs/<int:run_id>/", run_detail, name="run-detail")]
