"""How well the write guard separates attacks from benign look-alikes, and how fast it is.

    .venv/bin/python bench/guard_eval.py               # held-out split, both layers
    .venv/bin/python bench/guard_eval.py --split tune  # the split the thresholds were tuned on
    .venv/bin/python bench/guard_eval.py --patterns-only
    .venv/bin/python bench/guard_eval.py --show-misses

Reads tests/data/guard/*.jsonl, runs every line through ``check_write`` as
``submit_write`` would (the agent policy's default auto-approve floor of 4, a
vector from the local model for the semantic layer), and prints per category
how many attacks were held (quarantined or rejected) and how many benign lines
were held by mistake, then the guard's latency per write: p50 and p95 of the
pattern layer alone and of both layers (embedding included).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from governance.rules import guard  # noqa: E402

CORPUS = ROOT / "tests" / "data" / "guard"
AUTO_APPROVE = 4  # the design's default auto_approve_min_authority
HELD = ("quarantined", "rejected")
KEY = b"guard-eval"

Embedder = Callable[[Sequence[str]], list[list[float]]]


@dataclass(frozen=True)
class Row:
    text: str
    source_type: str
    kind: str
    label: str
    category: str
    split: str
    source_ref: str | None = None
    key: str | None = None


FRESH = CORPUS / "fresh"


def load_corpus(split: str | None = None, *, folder: Path = CORPUS) -> list[Row]:
    rows = []
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append(Row(**json.loads(line)))
    return [r for r in rows if split is None or r.split == split]


def proposal_for(row: Row, embedding: Sequence[float] | None = None) -> guard.WriteProposal:
    return guard.WriteProposal(
        statement=row.text,
        kind=row.kind,
        key=row.key,
        has_principal=row.kind not in ("project_fact", "tool_instruction"),
        source_type=row.source_type,
        source_ref=row.source_ref if row.source_ref is not None else f"{row.source_type}:corpus",
        requested_authority=None,
        embedding=tuple(embedding) if embedding is not None else None,
    )


def context_for(*, semantic: bool) -> guard.GuardContext:
    return guard.GuardContext(
        source_caps=guard.DEFAULT_SOURCE_CAPS, fingerprint_key=KEY, semantic_required=semantic
    )


def local_embedder(runtime: str = "onnx") -> Embedder:
    from governance.embeddings import LocalSentenceTransformerProvider

    provider = LocalSentenceTransformerProvider(runtime=runtime)
    return provider.embed


def judge(row: Row, embed: Embedder | None) -> guard.GuardResult:
    """One write through the guard, as ``submit_write`` runs it."""
    vector = embed([guard.semantic_text(row.text)])[0] if embed is not None else None
    return guard.check_write(
        proposal_for(row, vector),
        context_for(semantic=embed is not None),
        auto_approve_min_authority=AUTO_APPROVE,
    )


@dataclass
class Tally:
    total: int = 0
    held: int = 0
    active: int = 0


def evaluate(
    rows: Sequence[Row], embed: Embedder | None
) -> tuple[dict[tuple[str, str], Tally], list[tuple[Row, str]]]:
    tallies: dict[tuple[str, str], Tally] = defaultdict(Tally)
    misses: list[tuple[Row, str]] = []
    for row in rows:
        result = judge(row, embed)
        tally = tallies[(row.label, row.category)]
        tally.total += 1
        tally.held += result.outcome in HELD
        tally.active += result.outcome == "active"
        wrong = (row.label == "attack") != (result.outcome in HELD)
        if wrong:
            misses.append((row, result.outcome))
    return tallies, misses


def totals(tallies: dict[tuple[str, str], Tally], label: str) -> Tally:
    out = Tally()
    for (lab, _), t in tallies.items():
        if lab == label:
            out.total += t.total
            out.held += t.held
            out.active += t.active
    return out


def table(tallies: dict[tuple[str, str], Tally]) -> str:
    lines = [f"{'label':<7} {'category':<18} {'n':>4} {'held':>5} {'active':>6}  {'rate':>7}"]
    for label, rate_name in (("attack", "recall"), ("benign", "FP rate")):
        for (lab, category), t in sorted(tallies.items()):
            if lab != label:
                continue
            lines.append(
                f"{label:<7} {category:<18} {t.total:>4} {t.held:>5} {t.active:>6}  {t.held / t.total:>7.1%}"
            )
        t = totals(tallies, label)
        if t.total:
            lines.append(
                f"{label:<7} {'ALL (' + rate_name + ')':<18} {t.total:>4} {t.held:>5} {t.active:>6}  "
                f"{t.held / t.total:>7.1%}"
            )
    return "\n".join(lines)


def _p50_p95(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


def latencies(rows: Sequence[Row], embed: Embedder | None) -> tuple[tuple[float, float], tuple[float, float]]:
    """(p50, p95) in milliseconds of one write through the guard (embedding included):
    wall-clock time, and this process's CPU time (what neighbours on a shared
    machine cannot inflate)."""
    guard.clear_caches()
    wall, cpu = [], []
    for row in rows:
        start, start_cpu = time.perf_counter(), time.process_time()
        judge(row, embed)
        wall.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
        guard.clear_caches()
    return _p50_p95(wall), _p50_p95(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="heldout", choices=("heldout", "tune", "all"))
    parser.add_argument("--patterns-only", action="store_true")
    parser.add_argument("--show-misses", action="store_true")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="the lines in tests/data/guard/fresh/, written after the patterns and not part of the corpus",
    )
    parser.add_argument(
        "--runtime",
        default="onnx",
        choices=("onnx", "torch"),
        help="what runs the local model (the same vectors; onnx is the default and faster)",
    )
    args = parser.parse_args()
    if args.fresh:
        args.split = "fresh"
        rows = load_corpus(folder=FRESH)
    else:
        rows = load_corpus(None if args.split == "all" else args.split)
    embed = None if args.patterns_only else local_embedder(args.runtime)
    if embed is not None:
        embed(["warm up"])
    tallies, misses = evaluate(rows, embed)
    print(
        f"Split: {args.split}  ({len(rows)} lines; layers: "
        f"{'patterns' if embed is None else 'patterns + semantic'})"
    )
    print(table(tallies))
    if args.show_misses:
        print("\nMisses:")
        for row, outcome in misses:
            print(f"  [{row.label}/{row.category}/{row.source_type}] -> {outcome}: {row.text[:110]!r}")
    print(f"\nLatency per write (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores):")
    layers = [("pattern layer", None)] + ([("patterns + semantic", embed)] if embed is not None else [])
    for name, layer_embed in layers:
        (p50, p95), (c50, c95) = latencies(rows, layer_embed)
        print(
            f"  {name:<20} wall p50 {p50:6.2f} ms  p95 {p95:6.2f} ms   |  "
            f"CPU p50 {c50:6.2f} ms  p95 {c95:6.2f} ms"
        )


if __name__ == "__main__":
    main()
