from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "webapp.flywheel"
    label = "flywheel"
    verbose_name = "Data flywheel"

    def ready(self) -> None:
        from webapp.fleet.owners import owner_kind_register
        from webapp.flywheel.selectors import job_owner_names

        owner_kind_register(kind="flywheel", pattern=r"^flywheel-job-(\d+)$", names=job_owner_names)
