"""Server-rendered pages. Each renders a template that mounts its frontend bundle; live data comes
from the REST API in the browser, so the views only decide what a role sees."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from annotation.selectors import sessions_visible_to
from rl_control.models import Run
from webapp.accounts.roles import Role, user_roles
from webapp.pages import selectors
from webapp.pages.access import page_view
from webapp.pages.nav import PAGES_BY_NAME
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


@login_required
def workspace_session(request: HttpRequest, session_id: int) -> HttpResponse:
    """The live annotation page of one session; its data comes from the annotation API, which also
    decides whether the user may see the session (a page for someone else's session shows its 404)."""
    page = PAGES_BY_NAME["workspace"]
    if not page.allows(user_roles(request.user)):
        raise PermissionDenied(f"{page.label} is open to: {', '.join(sorted(r.value for r in page.roles))}.")
    if not sessions_visible_to(request.user).filter(pk=session_id).exists():
        raise Http404("No such annotation session.")
    return render(request, "pages/workspace_session.html", {"session_id": session_id})


@login_required
def workspace_fix(request: HttpRequest, trajectory_id: int) -> HttpResponse:
    """The fix view of a trajectory the reviewers sent back: their comments per step, thought edits,
    a changed action re-executed as a branch, resubmit. A trajectory the user may not fix shows 404."""
    from annotation.selectors import fixable_trajectories

    page = PAGES_BY_NAME["workspace"]
    if not page.allows(user_roles(request.user)):
        raise PermissionDenied(f"{page.label} is open to: {', '.join(sorted(r.value for r in page.roles))}.")
    if not fixable_trajectories(request.user).filter(pk=trajectory_id).exists():
        raise Http404("No such trajectory of yours to fix.")
    return render(request, "pages/workspace_fix.html", {"trajectory_id": trajectory_id})


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


def _runs_page_guard(request: HttpRequest) -> None:
    page = PAGES_BY_NAME["runs"]
    if not page.allows(user_roles(request.user)):
        raise PermissionDenied(f"{page.label} is open to: {', '.join(sorted(r.value for r in page.roles))}.")


@login_required
def run_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    """The live page of one run (its data and stream come from the run API and websocket)."""
    _runs_page_guard(request)
    if not Run.objects.filter(pk=run_id).exists():
        raise Http404("No such run.")
    return render(request, "pages/runs.html", {"view": "run", "run_id": run_id, "title": f"Run {run_id}"})


@login_required
def replay(request: HttpRequest, trajectory_id: int) -> HttpResponse:
    """Step-by-step replay of any trajectory: an RL episode or an annotation."""
    _runs_page_guard(request)
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
