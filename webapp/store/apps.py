from django.apps import AppConfig


class StoreConfig(AppConfig):
    name = "webapp.store"
    label = "store"
    verbose_name = "Trajectory store"
