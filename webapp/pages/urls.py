from django.contrib.auth import views as auth_views
from django.urls import path

from webapp.pages import views

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(redirect_authenticated_user=True), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", views.home, name="home"),
    path("workspace/", views.workspace, name="workspace"),
    path("review/", views.review, name="review"),
    path("runs/", views.runs, name="runs"),
    path("runs/new/", views.run_new, name="run-new"),
    path("runs/compare/", views.runs_compare, name="runs-compare"),
    path("replay/<int:trajectory_id>/", views.replay, name="replay"),
    path("pools/", views.pools, name="pools"),
    path("flywheel/", views.flywheel, name="flywheel"),
    path("fleet/", views.fleet, name="fleet"),
]
