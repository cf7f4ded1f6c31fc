"""Benchmark: texts/s of the text generators (``llm_texts`` stage), each beside its simple
baseline.

Usage::

    python benchmarks/bench_llm_texts.py [--texts 64] [--max-tokens 32] [--batch-size 16]
                                         [--hidden 128] [--layers 4] [--device cpu]
                                         [--requests 64] [--delay 0.05] [--concurrency 1 8 32]
                                         [--engine-n 4] [--engine-cpus 2]
                                         [--steps batching concurrency engines]
                                         [--json OUT.json]

1. **transformers, batched vs one prompt at a time**: a random-weight Llama built offline
   (:func:`corpus_audit.backends.fakes.text_models.random_causal_lm`; ``--hidden``, ``--layers``;
   the CLIP BPE tokenizer, 49 k words, so the output layer is a real vocabulary's size) writes
   ``--texts`` texts of up to ``--max-tokens`` tokens (random weights almost never emit the
   end token, so texts are full length on both sides; tokens/s is printed too) for 8 prompts, with ``llm.batch_size =
   --batch-size`` vs the **baseline** ``batch_size = 1`` (one sequence per ``generate``).
   On a GPU (``--device cuda``) give a larger ``--hidden``/``--layers`` for a real size.
2. **openai, N requests in flight vs one at a time**: :class:`corpus_audit.backends.fakes.chat_server.ChatServer`
   on 127.0.0.1 answers each request after ``--delay`` seconds (standing in for a server's
   latency); ``--requests`` requests of one text each with ``llm.concurrency`` = each value of
   ``--concurrency``; the **baseline** is concurrency 1.
3. **the stage, local engine vs Ray** (``engines``): the ``llm_texts`` stage on a study of
   the same tiny Llama (8 occupations x the persona prompt, unspecified + female: 16 pairs;
   ``llm.n = --engine-n``, capped at 3 x n, so the unspecified pairs run 3 rounds;
   ``llm.batch_size = --batch-size``) on the **local** engine (the model in this process,
   torch's default threads) vs the **Ray** engine (a local cluster of ``--engine-cpus`` CPUs
   started before the clock: one 1-CPU actor per CPU, each loading the model; the clock
   includes the actors' start and model load). Texts/s of each and the ratio ray/local;
   both runs write the same texts (checked).

The machine's CPUs are shared while others work: rerun for numbers you report.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from corpus_audit.backends.fakes.chat_server import ChatServer  # noqa: E402
from corpus_audit.backends.text_generators import (  # noqa: E402
    SamplingSettings,
    TextRequest,
    generate_all,
    load_text_generator,
)

PROMPTS = [
    f"Generate a persona of a {o}"
    for o in ("nurse", "pilot", "cook", "carpenter", "secretary", "lawyer", "baker", "chef")
]


def bench_transformers(args: argparse.Namespace) -> dict[str, float]:
    from corpus_audit.backends.fakes.text_models import random_causal_lm

    with tempfile.TemporaryDirectory() as tmp:
        path = random_causal_lm(Path(tmp) / "lm", hidden=args.hidden, layers=args.layers)
        settings = SamplingSettings(max_tokens=args.max_tokens)
        per_prompt = max(1, args.texts // len(PROMPTS))
        requests = [TextRequest(p, per_prompt, i) for i, p in enumerate(PROMPTS)]
        texts = per_prompt * len(PROMPTS)
        out = {}
        for name, batch in (("batched", args.batch_size), ("one_at_a_time", 1)):
            gen = load_text_generator(
                f"transformers:{path}", settings, batch_size=batch, device=args.device
            )
            generate_all(gen, requests[:1])  # warm-up
            start = time.perf_counter()
            got = generate_all(gen, requests)
            took = time.perf_counter() - start
            tokens = sum(c.completion_tokens for o in got for c in o)
            assert sum(len(o) for o in got) == texts
            out[name] = texts / took
            out[name + "_tokens"] = tokens / took
            gen.close()
    return out


def bench_concurrency(args: argparse.Namespace) -> dict[int, float]:
    def respond(prompt: str, n: int, seed: int | None, model: str) -> list[str]:
        return [f"She is a {prompt.split()[-1]} who loves her work."] * n

    requests = [TextRequest(PROMPTS[i % len(PROMPTS)], 1, i) for i in range(args.requests)]
    out = {}
    with ChatServer(respond, delay_s=args.delay) as server:
        for concurrency in sorted({1, *args.concurrency}):
            gen = load_text_generator(
                "openai:bench", SamplingSettings(), api_base=server.url, api_key_env="",
                concurrency=concurrency,
            )  # fmt: skip
            start = time.perf_counter()
            got = generate_all(gen, requests)
            took = time.perf_counter() - start
            assert sum(len(o) for o in got) == len(requests)
            out[concurrency] = len(requests) / took
    return out


def bench_engines(args: argparse.Namespace) -> dict[str, float]:
    from corpus_audit.backends.engines import open_engine
    from corpus_audit.backends.fakes.text_models import random_causal_lm
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.llm_texts import llm_texts

    occupations = [p.split()[-1] for p in PROMPTS]
    out: dict[str, float] = {}
    tables = {}
    ray = open_engine("ray", num_cpus=args.engine_cpus, object_store_memory=256 * 2**20)
    with tempfile.TemporaryDirectory() as tmp, ray:
        ray.describe()  # the cluster starts here, off the clock; the stage joins it
        path = random_causal_lm(Path(tmp) / "lm", hidden=args.hidden, layers=args.layers)
        for engine in ("local", "ray"):
            study = init_study(
                Path(tmp) / engine,
                [],
                overrides={
                    "llm": {
                        "enabled": True, "models": [f"transformers:{path}"],
                        "only_occupations": occupations, "only_prompts": ["persona"],
                        "genders": ["female"], "n": args.engine_n,
                        "max_texts": 3 * args.engine_n, "abandon_below": 0.0,
                        "max_tokens": args.max_tokens, "batch_size": args.batch_size,
                    },
                    "texts": {"source": "llm", "srbs": False},
                    "engine": {"engine": engine, "device": args.device},
                },
            )  # fmt: skip
            try:
                start = time.perf_counter()
                llm_texts(study, progress=False)
                took = time.perf_counter() - start
                tables[engine] = study.con.execute(
                    "SELECT text_id, text, seed FROM llm_texts ORDER BY text_id"
                ).fetchall()
            finally:
                study.close()
            out[engine] = len(tables[engine]) / took
            out[engine + "_texts"] = len(tables[engine])
    out["same_texts"] = float(tables["local"] == tables["ray"])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--texts", type=int, default=32)
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--engine-n", type=int, default=4)
    parser.add_argument("--engine-cpus", type=int, default=2)
    steps = ("batching", "concurrency", "engines")
    parser.add_argument("--steps", nargs="+", choices=steps, default=list(steps))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, object] = {}
    if "batching" in args.steps:
        results["transformers"] = report_batching(args)
    if "concurrency" in args.steps:
        results["openai"] = report_concurrency(args)
    if "engines" in args.steps:
        results["engines"] = report_engines(args)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


def report_batching(args: argparse.Namespace) -> dict[str, float]:
    lm = bench_transformers(args)
    print(
        f"transformers ({args.device}, hidden {args.hidden}, {args.layers} layers, "
        f"{args.max_tokens} tokens a text)"
    )
    import torch

    print(f"  torch threads: {torch.get_num_threads()}")
    for key, label in (
        ("batched", f"batched (batch_size {args.batch_size})"),
        ("one_at_a_time", "baseline, one prompt at a time"),
    ):
        print(f"  {label:<32} {lm[key]:8.2f} texts/s  {lm[key + '_tokens']:8.1f} tokens/s")
    print(f"  speed-up: {lm['batched'] / lm['one_at_a_time']:.1f}x")
    return lm


def report_concurrency(args: argparse.Namespace) -> dict[int, float]:
    http = bench_concurrency(args)
    print(f"openai-compatible client, loopback server answering in {args.delay:.3f} s")
    for concurrency, rate in http.items():
        label = "baseline, one at a time" if concurrency == 1 else f"concurrency {concurrency}"
        print(f"  {label:<24} {rate:8.1f} requests/s  ({rate / http[1]:.1f}x)")
    return http


def report_engines(args: argparse.Namespace) -> dict[str, float]:
    got = bench_engines(args)
    print(
        f"llm_texts stage, tiny Llama ({args.device}, hidden {args.hidden}, {args.layers} "
        f"layers, {args.max_tokens} tokens a text, batch_size {args.batch_size})"
    )
    for engine, label in (("local", "local engine"), ("ray", f"ray, {args.engine_cpus} actors")):
        print(f"  {label:<24} {got[engine]:8.2f} texts/s  ({int(got[engine + '_texts'])} texts)")
    same = "same texts" if got["same_texts"] else "TEXTS DIFFER"
    print(f"  ray/local: {got['ray'] / got['local']:.2f}x  ({same})")
    return got


if __name__ == "__main__":
    raise SystemExit(main())
