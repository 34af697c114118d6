from django.apps import AppConfig


class RlControlConfig(AppConfig):
    name = "rl_control"
    label = "rl_control"
    verbose_name = "RL runs"

    def ready(self) -> None:
        from rl_control import fleet_selectors, selectors
        from webapp.fleet.owners import owner_kind_register
        from webapp.flywheel.selectors import last_rl_run_source

        # The platform below names what this app owns and shows its last run (imports run one way).
        owner_kind_register(kind="rl", pattern=r"^rl:(\d+)(?::|$)", names=fleet_selectors.run_owner_names)
        last_rl_run_source(selectors.last_run_summary)
