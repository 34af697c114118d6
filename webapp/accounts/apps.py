from typing import Any

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "webapp.accounts"
    label = "accounts"
    verbose_name = "Accounts and roles"

    def ready(self) -> None:
        from django.contrib.auth.signals import user_logged_out

        user_logged_out.connect(_revoke_vnc_on_logout, dispatch_uid="accounts-logout-revokes-vnc")


def _revoke_vnc_on_logout(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Signing out ends the user's VNC tokens too (they would outlive the session by up to their TTL)."""
    from webapp.fleet.services import vnc_tokens_revoke_user

    if user is not None and user.pk is not None:
        vnc_tokens_revoke_user(user_id=user.pk)
