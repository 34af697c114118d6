from django.urls import include, path

from webapp.store.api import views

urlpatterns = [
    path("me/", views.MeView.as_view(), name="api-me"),
    path("pools/", views.PoolListView.as_view(), name="api-pools"),
    path("tasks/", views.TaskListView.as_view(), name="api-tasks"),
    path("", include("webapp.store.api.import_views")),
    path("tasks/<int:pk>/", views.TaskDetailView.as_view(), name="api-task"),
    path("trajectories/", views.TrajectoryListView.as_view(), name="api-trajectories"),
    path("trajectories/export", views.TrajectoryExportStreamView.as_view(), name="api-trajectories-export"),
    path("trajectories/<int:pk>/", views.TrajectoryDetailView.as_view(), name="api-trajectory"),
    path("checkpoints/", views.CheckpointListView.as_view(), name="api-checkpoints"),
    path(
        "checkpoints/endpoints/",
        views.CheckpointEndpointRegisterView.as_view(),
        name="api-checkpoint-endpoints",
    ),
    path(
        "checkpoints/<int:pk>/promote/", views.CheckpointPromoteView.as_view(), name="api-checkpoint-promote"
    ),
    path("sft-jobs/", views.SftJobListCreateView.as_view(), name="api-sft-jobs"),
    path("sft-jobs/<int:pk>/", views.SftJobDetailView.as_view(), name="api-sft-job"),
    path("sft-jobs/<int:pk>/cancel/", views.SftJobCancelView.as_view(), name="api-sft-job-cancel"),
    path("export-jobs/", views.ExportJobListCreateView.as_view(), name="api-export-jobs"),
    path("export-jobs/<int:pk>/", views.ExportJobDetailView.as_view(), name="api-export-job"),
    path("export-jobs/<int:pk>/cancel/", views.ExportJobCancelView.as_view(), name="api-export-job-cancel"),
    path(
        "export-jobs/<int:pk>/download/",
        views.ExportJobDownloadView.as_view(),
        name="api-export-job-download",
    ),
]
