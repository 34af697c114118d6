from django.apps import AppConfig


class FlywheelConfig(AppConfig):
    name = "webapp.flywheel"
    label = "flywheel"
    verbose_name = "Data flywheel"
