from django.urls import path

from webapp.flywheel.api import views

urlpatterns = [
    path("overview/", views.OverviewView.as_view(), name="api-flywheel-overview"),
    path("datasets/", views.DatasetListView.as_view(), name="api-flywheel-datasets"),
    path("datasets/<int:pk>/", views.DatasetDetailView.as_view(), name="api-flywheel-dataset"),
    path("datasets/<int:pk>/export/", views.DatasetExportView.as_view(), name="api-flywheel-dataset-export"),
    path(
        "pools/<int:pk>/validation/", views.PoolValidationView.as_view(), name="api-flywheel-pool-validation"
    ),
    path(
        "pools/<int:pk>/difficulty/", views.PoolDifficultyView.as_view(), name="api-flywheel-pool-difficulty"
    ),
    path("validate/", views.ValidateView.as_view(), name="api-flywheel-validate"),
    path("jobs/", views.JobListView.as_view(), name="api-flywheel-jobs"),
    path("jobs/<int:pk>/", views.JobDetailView.as_view(), name="api-flywheel-job"),
    path("jobs/<int:pk>/cancel/", views.JobCancelView.as_view(), name="api-flywheel-job-cancel"),
    path("promote/", views.PromoteView.as_view(), name="api-flywheel-promote"),
]
