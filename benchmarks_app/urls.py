from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from benchmarks_app.views import accounts, home

urlpatterns = [
    path("", home.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("audit/", include("benchmarks_app.views.audit")),
    path("probes/", include("benchmarks_app.views.probes")),
    path("checklist/", include("benchmarks_app.views.checklist")),
    path("runs/", include("benchmarks_app.views.runs")),
]
