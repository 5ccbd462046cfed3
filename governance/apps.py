from django.apps import AppConfig


class GovernanceConfig(AppConfig):
    name = "governance"
    verbose_name = "Memory governance"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from governance import rls, signals  # noqa: F401  (Celery context hooks)
        from memoryadmin import checks  # noqa: F401  (registers the secrets check)
        from memoryadmin.celery import ensure_filesystem_broker_folders

        # Producers (web, commands) and the worker alike need the folders of
        # the zero-setup broker before the first task is sent.
        ensure_filesystem_broker_folders()
        # Every connection sets the transaction's project scope for row-level security.
        connection_created.connect(rls.install, dispatch_uid="governance.rls")
