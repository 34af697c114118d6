"""The annotation app's pages of one object (routes in `urlpatterns`, included by project/urls.py):
a session's live workspace and the fix view of a trajectory sent back. Each renders a template that
mounts its frontend bundle; the view only decides whether the user may see that object."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path

from annotation.selectors import fixable_trajectories, sessions_visible_to
from webapp.pages.access import page_view


@page_view("workspace")
def workspace_session(request: HttpRequest, session_id: int) -> HttpResponse:
    """The live annotation page of one session; its data comes from the annotation API, which also
    decides whether the user may see the session (a page for someone else's session shows its 404)."""
    if not sessions_visible_to(request.user).filter(pk=session_id).exists():
        raise Http404("No such annotation session.")
    return render(request, "pages/workspace_session.html", {"session_id": session_id})


@page_view("workspace")
def workspace_fix(request: HttpRequest, trajectory_id: int) -> HttpResponse:
    """The fix view of a trajectory the reviewers sent back: their comments per step, thought edits,
    a changed action re-executed as a branch, resubmit. A trajectory the user may not fix shows 404."""
    if not fixable_trajectories(request.user).filter(pk=trajectory_id).exists():
        raise Http404("No such trajectory of yours to fix.")
    return render(request, "pages/workspace_fix.html", {"trajectory_id": trajectory_id})


urlpatterns = [
    path("workspace/<int:session_id>/", workspace_session, name="workspace-session"),
    path("workspace/fix/<int:trajectory_id>/", workspace_fix, name="workspace-fix"),
]
