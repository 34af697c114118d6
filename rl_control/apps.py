from django.apps import AppConfig


class RlControlConfig(AppConfig):
    name = "rl_control"
    label = "rl_control"
    verbose_name = "RL runs"
