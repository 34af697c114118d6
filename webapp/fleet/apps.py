from django.apps import AppConfig


class FleetConfig(AppConfig):
    name = "webapp.fleet"
    label = "fleet"
    verbose_name = "Environment fleet"
