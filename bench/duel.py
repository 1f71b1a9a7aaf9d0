"""Speed duel on real models: target-only greedy vs Hugging Face assisted generation vs our tree
harness, same prompts, pair, dtype and process. A benchmark, not a test.

    PYTHONPATH=. python bench/duel.py --models-dir /work/models --max-new-tokens 48 --out bench/results/duel.json

1. A short sweep (configs in SWEEP_GRID, interleaved per prompt) on prompts the duel does not use
   picks the harness config with the best tokens/s on this machine.
2. The duel: per prompt, every method once, in an order rotated from prompt to prompt so that the
   VM's slow minutes do not always hit the same method.
Every method counts its own prefill; tokens/s = output tokens / wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch

from replay.config import TreeConfig
from replay.live.generate import DecodeOptions, speculative_generate, target_generate
from replay.live.grid import config_name, parse_grid
from replay.live.models import LiveModel, load_pair
from replay.live.names import resolve_model_args
from replay.live.stdprompts import std_prompts

ARTICLE = "6,2x2,1x1"
# Chains and small trees: on a 2-core CPU a draft step costs ~40 % of a target step, so depth is
# expensive and wide levels are cheap to verify (16 tokens cost ~2.2x one). The '@0.4' chain stops
# drafting when the best path's draft probability drops below 0.4, like HF's assistant does per token.
SWEEP_GRID = "1,1,1;1,1,1,1;2,1x1;2,1x1,1;1,1,1,1,1,1@0.4"
DUEL_PROMPTS = (0, 1, 2, 3)  # indices into std_prompts(): two code, two prose
SWEEP_PROMPTS = (4, 5)  # disjoint from the duel's: the best config is not tuned on them


@dataclass(frozen=True)
class Run:
    method: str
    prompt: int
    output_ids: tuple[int, ...]
    seconds: float
    rounds: int = 0  # target forwards after prefill (speculative methods); 0 = not recorded
    accepted: float = 0.0  # mean draft tokens accepted per round
    draft_s: float = 0.0  # summed over rounds
    verify_s: float = 0.0
    draft_forwards: int = 0


@dataclass(frozen=True)
class MethodRow:
    method: str
    tokens: int
    seconds: float
    tokens_per_s: float
    speedup: float  # over target-only (HF greedy)
    mean_accepted_length: float | None
    identical: bool  # every output equals target-only greedy (ours) token for token
    draft_share: float | None = None  # of wall time
    verify_share: float | None = None
    extra: dict = field(default_factory=dict)


Method = Callable[[list[int]], Run]


def ours_target(target: LiveModel, n: int) -> Callable[[int, list[int]], Run]:
    def run(i: int, ids: list[int]) -> Run:
        g = target_generate(target, ids, DecodeOptions(n))
        return Run("target-only (harness loop)", i, g.output_ids, g.total_s)

    return run


def ours_tree(draft: LiveModel, target: LiveModel, config: TreeConfig, n: int, label: str):
    def run(i: int, ids: list[int]) -> Run:
        g = speculative_generate(draft, target, ids, config, DecodeOptions(n))
        r = g.rounds
        return Run(label, i, g.output_ids, g.total_s, len(r), sum(x.accepted_length for x in r) / max(len(r), 1),
                   sum(x.draft_time_s for x in r), sum(x.verify_time_s for x in r))

    return run


def hf_generate(target: LiveModel, n: int, draft: LiveModel | None, label: str):
    """``model.generate`` greedy; with ``assistant_model`` it is HF's assisted generation (a chain
    drafted by the assistant, defaults of transformers 5.24: up to 20 tokens, stop below 0.4
    confidence)."""

    def run(i: int, ids: list[int]) -> Run:
        x = torch.tensor([ids])
        kwargs = {"assistant_model": draft.module} if draft is not None else {}
        calls = {"target": 0, "draft": 0}
        hooks = [count_calls(target.module, calls, "target")] + ([count_calls(draft.module, calls, "draft")] if draft else [])
        t0 = time.perf_counter()
        try:
            with torch.inference_mode():
                out = target.module.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False, **kwargs)
        finally:
            seconds = time.perf_counter() - t0
            for h in hooks:
                h.remove()
        output = tuple(out[0, len(ids):].tolist())
        if draft is None:
            return Run(label, i, output, seconds)
        # Assisted generation has no separate prefill: every target forward is a verification
        # round committing accepted + 1 tokens, so accepted = (tokens - forwards) / forwards.
        f = calls["target"]
        return Run(label, i, output, seconds, f, (len(output) - f) / f, draft_forwards=calls["draft"])

    return run


def count_calls(module, calls: dict[str, int], key: str):
    def hook(*_):
        calls[key] += 1

    return module.register_forward_hook(hook)


def rotated(methods: list, k: int) -> list:
    return methods[k % len(methods):] + methods[: k % len(methods)]


def run_interleaved(methods: list, prompts: dict[int, list[int]], log) -> list[Run]:
    runs = []
    for k, (i, ids) in enumerate(prompts.items()):
        for m in rotated(methods, k):
            r = m(i, ids)
            log(f"prompt {i} {r.method}: {len(r.output_ids)} tok in {r.seconds:.1f} s ({len(r.output_ids) / r.seconds:.2f} tok/s)")
            runs.append(r)
    return runs


def same_as_reference(run: Run, reference: tuple[int, ...]) -> bool:
    # HF stops at EOS, the harness loop does not: a shorter output must be a prefix of the reference.
    return run.output_ids == reference[: len(run.output_ids)] and len(run.output_ids) > 0


def method_rows(runs: list[Run], reference_method: str, speed_reference: str) -> list[MethodRow]:
    ref = {r.prompt: r.output_ids for r in runs if r.method == reference_method}
    by: dict[str, list[Run]] = {}
    for r in runs:
        by.setdefault(r.method, []).append(r)
    tps = {m: sum(len(r.output_ids) for r in rs) / sum(r.seconds for r in rs) for m, rs in by.items()}
    rows = []
    for m, rs in by.items():
        secs = sum(r.seconds for r in rs)
        spec = any(r.rounds for r in rs)
        timed = any(r.draft_s for r in rs)  # the harness times draft and verify; HF does not say
        rounds = sum(r.rounds for r in rs)
        rows.append(MethodRow(
            m, sum(len(r.output_ids) for r in rs), round(secs, 2), round(tps[m], 3), round(tps[m] / tps[speed_reference], 3),
            round(sum(r.accepted * r.rounds for r in rs) / rounds, 3) if spec else None,
            all(same_as_reference(r, ref[r.prompt]) for r in rs),
            round(sum(r.draft_s for r in rs) / secs, 3) if timed else None,
            round(sum(r.verify_s for r in rs) / secs, 3) if timed else None,
            {"rounds": rounds, "draft_forwards": sum(r.draft_forwards for r in rs),
             "draft_s_per_round": round(sum(r.draft_s for r in rs) / rounds, 4),
             "verify_s_per_round": round(sum(r.verify_s for r in rs) / rounds, 4)} if spec else {},
        ))
    return rows


def best_config(runs: list[Run], configs: dict[str, TreeConfig]) -> str:
    speed = {m: sum(len(r.output_ids) for r in runs if r.method == m) / sum(r.seconds for r in runs if r.method == m) for m in configs}
    return max(speed, key=speed.get)


def markdown_table(rows: list[MethodRow]) -> str:
    lines = ["| method | tokens | seconds | tokens/s | speedup vs target-only (HF greedy) | target forwards | mean accepted length | draft / verify share of time | identical to greedy |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        acc = "–" if r.mean_accepted_length is None else f"{r.mean_accepted_length:.2f}"
        share = "–" if r.draft_share is None else f"{r.draft_share:.0%} / {r.verify_share:.0%}"
        fw = r.extra.get("rounds", r.tokens)
        lines.append(f"| {r.method} | {r.tokens} | {r.seconds:.1f} | {r.tokens_per_s:.2f} | {r.speedup:.2f}x | {fw} | {acc} | {share} | {'yes' if r.identical else 'NO'} |")
    return "\n".join(lines)


def machine() -> dict:
    cpu = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), platform.processor())
    import transformers

    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "transformers": transformers.__version__, "python": platform.python_version()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pair", default="qwen2.5-coder")
    p.add_argument("--models-dir")
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--sweep-tokens", type=int, default=24)
    p.add_argument("--grid", default=SWEEP_GRID)
    p.add_argument("--best", help="a config in grid syntax: skip the sweep and duel with it")
    p.add_argument("--draft-dtype", default="float32", help="the draft's dtype, for HF's assistant and ours alike (the target stays float32)")
    p.add_argument("--out", default="bench/results/duel.json")
    args = p.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731

    paths = resolve_model_args(None, None, args.pair, args.models_dir)
    t0 = time.perf_counter()
    draft, target = load_pair(paths.draft, paths.target, draft_dtype=args.draft_dtype)
    log(f"loaded in {time.perf_counter() - t0:.0f} s")
    texts = std_prompts()
    encode = lambda idx: {i: list(target.tokenizer.encode(texts[i].text)) for i in idx}  # noqa: E731

    configs = {config_name(c): c for c in parse_grid(args.best or args.grid)[0]}
    sweep_runs = []
    if args.best is None:
        sweep_runs = run_interleaved([ours_tree(draft, target, c, args.sweep_tokens, name) for name, c in configs.items()],
                                     encode(SWEEP_PROMPTS), log)
    best = best_config(sweep_runs, configs) if sweep_runs else next(iter(configs))
    log(f"best config: {best}")

    # generate()'s first call sets things up once (generation config, assistant candidate
    # generator): keep that out of the timed runs, as the sweep did for the harness.
    warm = next(iter(encode(SWEEP_PROMPTS).values()))
    hf_generate(target, 4, None, "warm-up")(0, warm)
    hf_generate(target, 4, draft, "warm-up")(0, warm)
    article = parse_grid(ARTICLE)[0][0]
    n = args.max_new_tokens
    methods = [
        hf_generate(target, n, None, "target-only greedy (HF generate)"),
        ours_target(target, n),
        hf_generate(target, n, draft, "HF assisted generation (0.5B assistant)"),
        ours_tree(draft, target, article, n, f"specreplay tree, article {config_name(article)}"),
        ours_tree(draft, target, configs[best], n, f"specreplay tree, {'given' if args.best else 'swept best'} {best}"),
    ]
    runs = run_interleaved(methods, encode(DUEL_PROMPTS), log)
    rows = method_rows(runs, "target-only (harness loop)", "target-only greedy (HF generate)")
    sweep_rows = method_rows(sweep_runs, sweep_runs[0].method, sweep_runs[0].method) if sweep_runs else []
    result = {
        "command": "PYTHONPATH=. python bench/duel.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": machine(), "dtype": "float32", "draft_dtype": args.draft_dtype, "max_new_tokens": n, "sweep_tokens": args.sweep_tokens,
        "duel_prompts": [texts[i].name for i in DUEL_PROMPTS], "sweep_prompts": [texts[i].name for i in SWEEP_PROMPTS],
        "best_config": best, "sweep": [asdict(r) for r in sweep_rows], "duel": [asdict(r) for r in rows],
        "runs": [asdict(r) for r in runs + sweep_runs],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(markdown_table(rows))
    print("\nsweep (tokens/s, mean accepted length):")
    for r in sweep_rows:
        print(f"  {r.method:28s} {r.tokens_per_s:6.2f} tok/s  accepted {r.mean_accepted_length}  draft {r.draft_share}  verify {r.verify_share}  {r.extra}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
