from django.urls import path

from annotation.api import review_views as views

urlpatterns = [
    path("queue/", views.QueueView.as_view(), name="api-review-queue"),
    path("take/", views.TakeView.as_view(), name="api-review-take"),
    path("trajectories/<int:pk>/", views.TrajectoryReviewView.as_view(), name="api-review-trajectory"),
    path("trajectories/<int:pk>/agreement/", views.AgreementView.as_view(), name="api-review-agreement"),
    path("trajectories/<int:pk>/duplicates/", views.DuplicatesView.as_view(), name="api-review-duplicates"),
    path(
        "trajectories/<int:pk>/executability/",
        views.ExecutabilityView.as_view(),
        name="api-review-executability",
    ),
    path("reviews/<int:pk>/submit/", views.SubmitView.as_view(), name="api-review-submit"),
]
