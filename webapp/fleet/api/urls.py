from django.urls import path

from webapp.fleet.api import views

urlpatterns = [
    path("", views.FleetView.as_view(), name="api-fleet"),
    path("envs/<str:env_id>/watch/", views.FleetEnvWatchView.as_view(), name="api-fleet-watch"),
]
