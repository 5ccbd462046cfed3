"""The zero-setup broker hands a worker only whole messages (memoryadmin/broker.py)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from queue import Empty
from typing import Any

from kombu import Connection

from memoryadmin.celery import app

TRANSPORT = "memoryadmin.broker:Transport"
# Large enough that writing one takes long enough for a polling reader to meet
# it half-written: kombu's own channel handed every one of 400 such messages
# over empty when this was written.
PAYLOAD = "x" * 200_000


def _options(folder: Path) -> dict[str, Any]:
    return {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "processed_folder": str(folder / "processed"),
        "store_processed": False,
    }


def _send(folder: Path, count: int) -> None:
    channel: Any = Connection(transport=TRANSPORT, transport_options=_options(folder)).default_channel
    for n in range(count):
        channel._put("jobs", {"n": n, "pad": PAYLOAD})


def test_a_polling_reader_gets_every_message_whole(tmp_path: Path) -> None:
    (tmp_path / "processed").mkdir()
    reader: Any = Connection(transport=TRANSPORT, transport_options=_options(tmp_path)).default_channel
    count = 150
    # Another process, as the web process and the worker are.
    sender = multiprocessing.get_context("spawn").Process(target=_send, args=(tmp_path, count))
    sender.start()
    received: list[int] = []
    try:
        while len(received) < count and (sender.is_alive() or any(tmp_path.glob("*.msg"))):
            try:
                received.append(reader._get("jobs")["n"])  # a half-written message raises here
            except Empty:
                continue
    finally:
        sender.join(60)
    assert sender.exitcode == 0
    assert sorted(received) == list(range(count))
    assert not list(tmp_path.glob("*.part"))


def test_the_zero_setup_broker_uses_it() -> None:
    if str(app.conf.broker_url).startswith("filesystem://"):
        assert app.conf.broker_transport == TRANSPORT
        assert app.connection_for_write().transport_cls == TRANSPORT
