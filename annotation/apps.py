from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Annotation"

    def ready(self) -> None:
        from annotation import selectors
        from webapp.fleet.owners import owner_kind_register
        from webapp.store.media import media_owner_register

        # The platform below names and guards what this app owns (imports run one way).
        owner_kind_register(
            kind="annotation", pattern=r"^annotation:(\d+)$", names=selectors.session_owner_names
        )
        for prefix in ("annotation/s", "thinkaloud/s"):
            media_owner_register(prefix=prefix, readable=selectors.session_media_readable)
