"""Real sample dumps: the Qwen2.5-Coder pair (float32, CPU, greedy) on the standard prompts, several
tree configs, both models loaded ONCE for all of them (the CLI would reload per config: minutes).

    PYTHONPATH=. python scripts/make_real_samples.py --models-dir /work/models --max-new-tokens 40

Writes sample_dumps/qwen2.5-coder/<config>/ (npz rounds + manifest.json with the target-only
baseline and identical_to_baseline) and sample_dumps/real_prompts.md (the prompts and their sources).
A config whose manifest exists is skipped, so a killed run can be resumed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

from replay.config import TreeConfig
from replay.live.generate import DecodeOptions
from replay.live.models import load_pair
from replay.live.names import resolve_model_args
from replay.live.report import format_summary
from replay.live.run import compare_with_baseline, run_baseline, run_speculative, save_run_manifest, summarize
from replay.live.stdprompts import prompts_markdown, std_prompts

# name -> (topKSpec, topHead); the article's config first.
CONFIGS = {
    "article": ([[6], [2, 2], [1, 1]], [1, 2, 2]),
    "chain4": ([[1], [1], [1], [1]], [1, 1, 1, 1]),
    "wide": ([[8], [3, 3], [2, 2]], [1, 2, 2]),
    "deep": ([[4], [2, 2], [1, 1], [1, 1], [1]], [1, 2, 2, 2, 1]),
}


def tree_config(spec: list[list[int]], head: list[int]) -> TreeConfig:
    return TreeConfig(gamma=len(head), top_k_spec=tuple(map(tuple, spec)), top_head=tuple(head))


def write_prompts_doc(path: Path, prompts, max_new_tokens: int) -> None:
    header = (
        "# Prompts of the real sample dumps\n\n"
        "Built by `replay/live/stdprompts.py` (`std_prompts()`) from text that ships with Python "
        f"{sys.version.split()[0]} and numpy; not chosen or edited for acceptance. Encoded with the "
        "target's tokenizer (no chat template), "
        f"{max_new_tokens} new tokens each, greedy, float32, CPU. Sequence index in the dumps = number below - 1.\n"
    )
    path.write_text(prompts_markdown(prompts, header), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", default="qwen2.5-coder")
    parser.add_argument("--models-dir", default=None)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--out", default="sample_dumps/qwen2.5-coder")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names from CONFIGS")
    args = parser.parse_args(argv)

    paths = resolve_model_args(None, None, args.pair, args.models_dir)
    t0 = time.perf_counter()
    draft, target = load_pair(paths.draft, paths.target)
    print(f"loaded pair in {time.perf_counter() - t0:.1f} s", flush=True)
    prompts = std_prompts()
    ids = [list(target.tokenizer.encode(p.text)) for p in prompts]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_prompts_doc(out.parent / "real_prompts.md", prompts, args.max_new_tokens)
    options = DecodeOptions(args.max_new_tokens)
    # One baseline for all configs: target-only greedy is the same whatever the tree.
    baseline = run_baseline(target, ids, options)
    print(
        f"baseline: {sum(len(g.output_ids) for g in baseline)} tokens in {sum(g.total_s for g in baseline):.1f} s",
        flush=True,
    )
    for name in args.configs.split(","):
        dump = out / name
        if (dump / "manifest.json").is_file():
            print(f"{name}: kept from before", flush=True)
            continue
        shutil.rmtree(dump, ignore_errors=True)
        config = tree_config(*CONFIGS[name])
        gens = run_speculative(draft, target, ids, config, options, dump)
        comparison = compare_with_baseline(gens, baseline, 0.0)
        save_run_manifest(dump, config, draft, target, options, gens, comparison)
        print(f"== {name} {json.dumps(config.to_json())}\n{format_summary(summarize(gens), comparison)}", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
