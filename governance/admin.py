"""What the platform operator's Django admin shows, and how its changes are audited.

- django-celery-beat's models are unregistered: its task editor would let
  anyone with admin access schedule arbitrary tasks with arbitrary arguments.
  The beat schedule lives in settings (``CELERY_BEAT_SCHEDULE``).
- Role groups are unregistered: roles are held per project (memberships,
  managed in the console or with ``create_user_token``), not by groups.
- Governance data is not editable here at all (none of its models is
  registered; pghistory's event browser is read-only), so memory, reviews and
  roles only change through the audited services.
- What remains writable (people's accounts) is audited: every admin
  ``LogEntry`` (addition, change, deletion) is copied into the platform's
  audit chain (project-less) by ``record_admin_change``. This is bookkeeping
  of an action already taken, not a business rule.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.signals import post_save
from django.dispatch import receiver

from governance.services import audit

ACTIONS = {ADDITION: "added", CHANGE: "changed", DELETION: "deleted"}

for model in list(admin.site._registry):
    if model._meta.app_label == "django_celery_beat":
        admin.site.unregister(model)
if admin.site.is_registered(Group):
    admin.site.unregister(Group)


@receiver(post_save, sender=LogEntry, dispatch_uid="governance.admin.record_admin_change")
def record_admin_change(sender: type[LogEntry], instance: LogEntry, created: bool, **_: Any) -> None:
    if not created:
        return
    # The admin's add, change and delete views already run in a transaction, so the
    # entry commits with the change; bulk actions may not, hence the atomic block.
    with transaction.atomic():
        audit.record(
            None,
            f"admin.{ACTIONS.get(instance.action_flag, 'action')}",
            (instance.content_type.model if instance.content_type else "object", instance.object_id or ""),
            actor=f"user:{instance.user.get_username()}",
            actor_user=instance.user,
            data={"object": instance.object_repr, "change": instance.get_change_message()},
        )
