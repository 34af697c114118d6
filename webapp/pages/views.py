"""Server-rendered pages. Each renders a template that mounts its frontend bundle; live data comes
from the REST API in the browser, so the views only decide what a role sees."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from webapp.accounts.roles import Role, user_roles
from webapp.pages import selectors
from webapp.pages.access import page_view
from webapp.store.models import ExportFormat, Trajectory, TrajectorySource


@login_required
def home(request: HttpRequest) -> HttpResponse:
    roles = user_roles(request.user)
    context: dict[str, object] = {"roles": {role.value: role in roles for role in Role}}
    if Role.RESEARCHER in roles or Role.ADMIN in roles:
        context["export_formats"] = ExportFormat.choices
        context["trajectory_sources"] = TrajectorySource.choices
    if Role.ADMIN in roles:
        context["users"], context["user_count"] = selectors.users_overview()
    return render(request, "pages/home.html", context)


@page_view("workspace")
def workspace(request: HttpRequest) -> HttpResponse:
    return render(request, "pages/workspace.html")


@page_view("review")
def review(request: HttpRequest) -> HttpResponse:
    return render(request, "pages/review.html")


@page_view("runs")
def runs(request: HttpRequest) -> HttpResponse:
    return render(request, "pages/runs.html", {"view": "list"})


@page_view("runs")
def run_new(request: HttpRequest) -> HttpResponse:
    """The launch form; `?fork=<run id>` forks that run (optionally `&checkpoint=<version>`)."""
    return render(request, "pages/runs.html", {"view": "launch", "title": "Launch a run"})


@page_view("runs")
def runs_compare(request: HttpRequest) -> HttpResponse:
    return render(request, "pages/runs.html", {"view": "compare", "title": "Compare runs"})


@page_view("runs")
def replay(request: HttpRequest, trajectory_id: int) -> HttpResponse:
    """Step-by-step replay of any trajectory: an RL episode or an annotation."""
    if not Trajectory.objects.filter(pk=trajectory_id).exists():
        raise Http404("No such trajectory.")
    return render(
        request,
        "pages/runs.html",
        {"view": "replay", "trajectory_id": trajectory_id, "title": f"Replay of trajectory {trajectory_id}"},
    )


@page_view("pools")
def pools(request: HttpRequest) -> HttpResponse:
    return render(request, "pages/pools.html")


@page_view("flywheel")
def flywheel(request: HttpRequest) -> HttpResponse:
    return render(request, "pages/flywheel.html")


@page_view("fleet")
def fleet(request: HttpRequest) -> HttpResponse:
    return render(request, "pages/fleet.html")
