"""Preparing the local model for ONNX Runtime: one export per set of weights, checked, never half-written.

The tests marked ``model`` export the real all-MiniLM-L6-v2 into a temporary
folder (about 5 s each).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from governance import embeddings_onnx
from governance.embeddings import _default_model_path


def fake_model(folder: Path, weights: bytes) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 384}')
    (folder / "model.safetensors").write_bytes(weights)
    return folder


def test_the_graph_file_is_named_after_the_weights(tmp_path: Path) -> None:
    first = fake_model(tmp_path / "a", b"weights one")
    same = fake_model(tmp_path / "b", b"weights one")
    other = fake_model(tmp_path / "c", b"weights two")
    cache = tmp_path / "cache"
    assert embeddings_onnx.graph_file(first, cache) == embeddings_onnx.graph_file(same, cache)
    assert embeddings_onnx.graph_file(first, cache) != embeddings_onnx.graph_file(other, cache)
    assert embeddings_onnx.graph_file(first, cache).parent == cache


def test_the_default_cache_folder_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert embeddings_onnx.default_cache_dir() == tmp_path / "memoryadmin"


@pytest.mark.model
def test_processes_starting_together_export_once_and_agree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _default_model_path()
    exports: list[Path] = []
    real_export = embeddings_onnx._export

    def counted(model_path: Path, graph: Path, *, num_threads: int | None) -> None:
        exports.append(graph)
        real_export(model_path, graph, num_threads=num_threads)

    monkeypatch.setattr(embeddings_onnx, "_export", counted)
    encoders: list[embeddings_onnx.OnnxSentenceEncoder] = []
    barrier = threading.Barrier(2)

    def start() -> None:
        barrier.wait()
        encoders.append(embeddings_onnx.load_encoder(model, tmp_path, num_threads=1))

    threads = [threading.Thread(target=start) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(exports) == 1
    assert len(encoders) == 2
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".onnx"] == [exports[0].name]
    a, b = (encoder.encode(["the same sentence"], batch_size=8)[0] for encoder in encoders)
    assert a == b

    # A later start reuses the file.
    embeddings_onnx.load_encoder(model, tmp_path, num_threads=1)
    assert len(exports) == 1


@pytest.mark.model
def test_a_graph_that_disagrees_with_torch_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No real graph disagrees by less than nothing: this stands in for an
    # exporter that gets the model wrong.
    monkeypatch.setattr(embeddings_onnx, "TOLERANCE", -1.0)
    with pytest.raises(embeddings_onnx.OnnxUnavailable, match="differ from torch's"):
        embeddings_onnx.load_encoder(_default_model_path(), tmp_path, num_threads=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".export.lock"]
