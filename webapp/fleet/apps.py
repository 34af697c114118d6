from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "webapp.fleet"
    label = "fleet"
    verbose_name = "Environment fleet"

    def ready(self) -> None:
        # Connects the Celery signals: worker announcements and the sent-at header of every task.
        from webapp.fleet import queues  # noqa: F401
