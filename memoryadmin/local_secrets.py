"""Secrets for the local development stack, generated once and kept under ``.data/``.

Production passes ``SECRET_KEY`` and ``TOMBSTONE_KEY`` in the environment.
On a developer's machine, ``make run`` (and anything started with
``DEBUG=1``) reads them from a file only its owner can read, so a fresh
checkout works without anyone choosing a secret, and no secret is published
in this repository.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

NAMES = ("SECRET_KEY", "TOMBSTONE_KEY")


def load_or_create(path: Path) -> dict[str, str]:
    """The secrets in ``path``, creating the file (mode 0600) with fresh ones on first use."""
    try:
        stored = json.loads(path.read_text())
    except FileNotFoundError:
        stored = {}
    if all(isinstance(stored.get(name), str) and stored[name] for name in NAMES):
        return {name: stored[name] for name in NAMES}
    path.parent.mkdir(parents=True, exist_ok=True)
    fresh = {name: secrets.token_urlsafe(50) for name in NAMES}
    try:
        # O_EXCL: two processes starting at once must not each write their own
        # secrets (the loser would sign sessions the winner cannot read).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return {name: json.loads(path.read_text())[name] for name in NAMES}
    with os.fdopen(fd, "w") as handle:
        json.dump(fresh, handle)
    return fresh
