from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import include, path

from benchmarks_app.views import accounts, home

urlpatterns = [
    path("", home.home, name="home"),
    path("accounts/login/", accounts.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("accounts/signup/sent/", accounts.signup_sent, name="signup_sent"),
    path(
        "accounts/signup/confirm/<uidb64>/<token>/",
        accounts.signup_confirm,
        name="signup_confirm",
    ),
    path("accounts/password-reset/", accounts.PasswordResetView.as_view(), name="password_reset"),
    path(
        "accounts/password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "accounts/reset/<uidb64>/<token>/",
        accounts.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "accounts/reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("accounts/settings/", include("benchmarks_app.views.notifications")),
    path("audit/", include("benchmarks_app.views.audit")),
    path("probes/", include("benchmarks_app.views.probes")),
    path("checklist/", include("benchmarks_app.views.checklist")),
    path("runs/", include("benchmarks_app.views.runs")),
    path("boards/", include("benchmarks_app.views.paired")),
]
