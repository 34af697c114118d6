from django.urls import path

from annotation.api import assignment_views, fix_views, views
from annotation.api import thinkaloud_views as ta

urlpatterns = [
    path("assignments/", assignment_views.AssignmentListView.as_view(), name="api-annotation-assignments"),
    path(
        "assignments/<int:pk>/skip/",
        assignment_views.AssignmentSkipView.as_view(),
        name="api-annotation-assignment-skip",
    ),
    path("workload/", assignment_views.WorkloadView.as_view(), name="api-annotation-workload"),
    path("sessions/", views.SessionListStartView.as_view(), name="api-annotation-sessions"),
    path("sessions/<int:pk>/", views.SessionDetailView.as_view(), name="api-annotation-session"),
    path("sessions/<int:pk>/decide/", views.SessionDecideView.as_view(), name="api-annotation-decide"),
    path("sessions/<int:pk>/submit/", views.SessionSubmitView.as_view(), name="api-annotation-submit"),
    path("sessions/<int:pk>/abandon/", views.SessionAbandonView.as_view(), name="api-annotation-abandon"),
    path(
        "sessions/<int:pk>/heartbeat/", views.SessionHeartbeatView.as_view(), name="api-annotation-heartbeat"
    ),
    path("sessions/<int:pk>/vnc/", views.SessionVncView.as_view(), name="api-annotation-vnc"),
    path(
        "sessions/<int:pk>/takeover/start/",
        views.SessionTakeoverStartView.as_view(),
        name="api-annotation-takeover-start",
    ),
    path(
        "sessions/<int:pk>/takeover/end/",
        views.SessionTakeoverEndView.as_view(),
        name="api-annotation-takeover-end",
    ),
    # the fix loop (issue 20)
    path("fixes/", fix_views.FixListView.as_view(), name="api-annotation-fixes"),
    path("fixes/<int:pk>/", fix_views.FixDetailView.as_view(), name="api-annotation-fix"),
    path(
        "fixes/<int:pk>/steps/<int:index>/", fix_views.FixStepView.as_view(), name="api-annotation-fix-step"
    ),
    path(
        "fixes/<int:pk>/steps/<int:index>/branch/",
        fix_views.FixBranchView.as_view(),
        name="api-annotation-fix-branch",
    ),
    path("fixes/<int:pk>/resubmit/", fix_views.FixResubmitView.as_view(), name="api-annotation-fix-resubmit"),
    # think-aloud (issue 6)
    path("sessions/<int:pk>/thinkaloud/", ta.ThinkAloudStateView.as_view(), name="api-thinkaloud"),
    path(
        "sessions/<int:pk>/thinkaloud/chunks/<int:index>/",
        ta.ChunkUploadView.as_view(),
        name="api-thinkaloud-chunk",
    ),
    path(
        "sessions/<int:pk>/thinkaloud/finish/",
        ta.ThinkAloudFinishView.as_view(),
        name="api-thinkaloud-finish",
    ),
    path(
        "sessions/<int:pk>/thinkaloud/steps/<int:index>/",
        ta.StepThoughtView.as_view(),
        name="api-thinkaloud-step",
    ),
    path(
        "sessions/<int:pk>/thinkaloud/steps/<int:index>/move/",
        ta.StepMoveView.as_view(),
        name="api-thinkaloud-step-move",
    ),
    path("thinkaloud/asr/", ta.AsrModelView.as_view(), name="api-thinkaloud-asr"),
    path(
        "thinkaloud/trajectories/<int:trajectory_id>/",
        ta.ReviewThinkAloudView.as_view(),
        name="api-thinkaloud-review",
    ),
    path(
        "thinkaloud/trajectories/<int:trajectory_id>/steps/<int:index>/",
        ta.ReviewStepThoughtView.as_view(),
        name="api-thinkaloud-review-step",
    ),
    path(
        "thinkaloud/trajectories/<int:trajectory_id>/steps/<int:index>/move/",
        ta.ReviewStepMoveView.as_view(),
        name="api-thinkaloud-review-step-move",
    ),
]
