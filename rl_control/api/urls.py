from django.urls import path

from rl_control.api import views

urlpatterns = [
    path("runs/", views.RunListCreateView.as_view(), name="api-rl-runs"),
    path("runs/<int:pk>/", views.RunDetailView.as_view(), name="api-rl-run"),
    path("runs/<int:pk>/launch/", views.RunLaunchView.as_view(), name="api-rl-run-launch"),
    path("runs/<int:pk>/pause/", views.RunPauseView.as_view(), name="api-rl-run-pause"),
    path("runs/<int:pk>/resume/", views.RunResumeView.as_view(), name="api-rl-run-resume"),
    path("runs/<int:pk>/stop/", views.RunStopView.as_view(), name="api-rl-run-stop"),
    path("runs/<int:pk>/fork/", views.RunForkView.as_view(), name="api-rl-run-fork"),
    path("runs/<int:pk>/metrics/", views.RunMetricsView.as_view(), name="api-rl-run-metrics"),
    path(
        "runs/<int:pk>/metrics/record/",
        views.RunMetricsRecordView.as_view(),
        name="api-rl-run-metrics-record",
    ),
    path("runs/<int:pk>/metric-names/", views.RunMetricNamesView.as_view(), name="api-rl-run-metric-names"),
    path("runs/<int:pk>/alerts/", views.RunAlertListView.as_view(), name="api-rl-run-alerts"),
    path("runs/<int:pk>/episodes/", views.RunEpisodeListView.as_view(), name="api-rl-run-episodes"),
    path("runs/<int:pk>/episodes/pick/", views.RunEpisodePickView.as_view(), name="api-rl-run-episodes-pick"),
    path("runs/<int:pk>/export.csv", views.RunExportCsvView.as_view(), name="api-rl-run-export-csv"),
    path(
        "runs/<int:pk>/export.tfevents", views.RunExportTensorBoardView.as_view(), name="api-rl-run-export-tb"
    ),
    path("runs/<int:pk>/checkpoints/", views.RunCheckpointListView.as_view(), name="api-rl-run-checkpoints"),
    path("runs/<int:pk>/fleet/", views.RunFleetView.as_view(), name="api-rl-run-fleet"),
    path(
        "runs/<int:pk>/fleet/<str:lease_id>/watch/",
        views.RunLeaseWatchView.as_view(),
        name="api-rl-run-watch",
    ),
    path("compare/", views.RunCompareView.as_view(), name="api-rl-compare"),
    path("trajectories/<int:pk>/replay/", views.TrajectoryReplayView.as_view(), name="api-rl-replay"),
    path("presets/", views.PresetListView.as_view(), name="api-rl-presets"),
    path("config-schema/", views.ConfigSchemaView.as_view(), name="api-rl-config-schema"),
    path("metric-names/", views.MetricCatalogueView.as_view(), name="api-rl-metric-names"),
]
