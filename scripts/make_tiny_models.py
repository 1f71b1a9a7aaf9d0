"""Save a tiny random target, a draft that mostly agrees with it, a tokenizer, prompts and a tree
config into one directory, to try ``specreplay generate`` / ``sweep`` without real weights.

    python scripts/make_tiny_models.py OUT_DIR [--arch qwen2|llama] [--vocab 64] [--noise 0.05]
    python scripts/make_tiny_models.py OUT_DIR --cheap-draft     # 8-layer target, 2-layer draft

The default draft is a noisy copy of the target (same cost: no speedup, exercises acceptance).
``--cheap-draft`` builds a wider 8-layer target whose last 6 layers are damped and a draft made of
its first 2 layers: it agrees often and costs about a quarter, so speculation can win.

Writes OUT_DIR/target, OUT_DIR/draft (Hugging Face dirs), OUT_DIR/target.gguf (qwen2 only),
OUT_DIR/prompts.txt (text), OUT_DIR/prompts.jsonl (token ids), OUT_DIR/tree.json.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from replay.live.models.random_weights import build_model
from replay.testing.tiny import (
    build_word_tokenizer,
    damp_late_layers,
    noisy_copy,
    save_gguf_qwen2,
    save_hf_dir,
    tiny_config,
    truncated_draft,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--arch", default="qwen2", choices=["qwen2", "llama"])
    ap.add_argument("--vocab", type=int, default=64)
    ap.add_argument("--noise", type=float, default=0.05, help="relative weight noise of the draft")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cheap-draft", action="store_true", help="8-layer target, its first 2 layers as the draft")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok = build_word_tokenizer(args.vocab)
    if args.cheap_draft:
        target = build_model(tiny_config(args.arch, args.vocab, layers=8, hidden=256), seed=args.seed)
        draft = truncated_draft(damp_late_layers(target, keep=2, factor=0.15), layers=2)
    else:
        target = build_model(tiny_config(args.arch, args.vocab), seed=args.seed)
        draft = noisy_copy(target, args.noise, seed=args.seed + 1)
    save_hf_dir(target, out / "target", tok)
    save_hf_dir(draft, out / "draft", tok)
    if args.arch == "qwen2":
        save_gguf_qwen2(target, out / "target.gguf")
    prompts = [[1, 2, 3, 4], [10, 20, 30], [5, 6], [40, 41, 42, 43, 44]]
    (out / "prompts.jsonl").write_text("".join(json.dumps({"prompt_ids": p}) + "\n" for p in prompts))
    (out / "prompts.txt").write_text("".join(" ".join(f"t{t}" for t in p) + "\n" for p in prompts))
    tree = {"gamma": 3, "topKSpec": [[6], [2, 2], [1, 1]], "topHead": [1, 2, 2], "treeType": 0, "gammaThreshold": 0}
    (out / "tree.json").write_text(json.dumps(tree) + "\n")
    print(f"wrote {out}: target/, draft/, prompts.txt, prompts.jsonl, tree.json")


if __name__ == "__main__":
    main()
