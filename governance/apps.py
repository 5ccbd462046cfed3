from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Memory governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from governance import signals  # noqa: F401  (Celery context hooks)
