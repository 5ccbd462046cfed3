"""The zero-setup broker: kombu's filesystem transport, with messages that appear only once whole.

kombu's own filesystem channel creates a message's file under its final name
and then writes it. A worker polling the same folder may list the file in
between, move it to its processed folder and read it empty; the JSON error
that follows ends the worker's consumer, and the worker with it (seen in the
test suite while a second worker was starting). Here a message is written
under a name no consumer takes (it does not end in ``.<queue>.msg``) and then
renamed into place, which is atomic within one folder, so a consumer sees
either no message or all of it. Everything else is kombu's.

Used only when ``CELERY_BROKER_URL`` is ``filesystem://`` (settings.py); Redis
and RabbitMQ are untouched.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

# What kombu's channel looks for after the first dot of a message's name is
# "<queue>.msg"; a name ending in this is skipped until it is renamed.
PARTIAL_SUFFIX = ".part"


class Channel(filesystem.Channel):
    # kombu's own filesystem channel already differs from its base in this signature; kept as it is.
    def _put(self, queue: str, payload: dict[str, Any], **kwargs: Any) -> None:  # type: ignore[override]
        """Put ``payload`` on ``queue``: written whole under a passing name, then renamed into place."""
        # The name kombu gives a message: consumers take them in the order of its time prefix.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb", buffering=0) as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):  # never created, or already renamed
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
