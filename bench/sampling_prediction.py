"""Prediction across shapes at temperature T (issue 20, check 3), on the real pair.

1. Record a WIDE tree live: ``specreplay generate --config WIDE --temperature T --seed S`` on the
   standard prompts (replay/live/stdprompts.py), each repeated ``--repeat`` times (independent
   draws per sequence).
2. Predict offline, from that dump alone, the mean accepted length of a NARROW tree at T: each
   recorded round's narrow tree is the wide tree's nodes of the same (parent, draft rank), and its
   expected accepted length is the sampling walk on them, P(reach n) = prod of p_T(child | parent),
   E[L] = sum P(reach n), with p_T read from the dump's ``node_logprobs`` column at the run's
   temperature: exact, whatever the recorded top-K (docs/dump-format.md, "Node log-probabilities").
3. Run NARROW live on the same prompts, seed and T, and measure its mean accepted length.
4. Compare: prediction (mean of E_i over the wide rounds, CI from their spread) against
   measurement (mean of A_i over the narrow rounds, CI from their spread), and, as a check of the
   recording, the wide run's own measured mean against the same walk on the whole wide tree
   (z = sum(A_i - E_i) / sqrt(sum Var_i), |z| < 4 expected).

NARROW must expand every node of each of its levels (topHead = the level's node count, so no
selection rule decides which): then its tree is determined by the wide round wherever the wide
round expanded those nodes. A round where it did not is counted and left out, never guessed.

    nice -n 10 env PYTHONPATH=. python bench/sampling_prediction.py --out /tmp/sp \\
        --wide '[4]|[2,2]|[1,1]' --narrow '[2]|[1,1]' --temperature 0.7 --max-new-tokens 48 --repeat 4

Models: ``--pair qwen2.5-coder`` in ``--models-dir`` (default ~/.cache/specreplay/models). Writes
OUT/wide, OUT/narrow (the two dumps) and OUT/result.json; prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))

from replay.cli import main as specreplay  # noqa: E402
from replay.core.config_grammar import parse_spec  # noqa: E402
from replay.core.tree import Tree  # noqa: E402
from replay.engine.replayer import ReplayOptions, replay_directory  # noqa: E402
from replay.io.formats.matrix_io import read_matrix  # noqa: E402
from replay.live.stdprompts import std_prompts  # noqa: E402


def narrow_nodes(tree: Tree, top_k_spec) -> tuple[np.ndarray, np.ndarray] | None:
    """(wide node ids, narrow parents) of the narrow tree in tree order, root first; None when the
    wide round did not expand a node the narrow tree expands (its children are not recorded)."""
    wide_ids, parents = [0], [-1]
    level = [0]  # narrow indices of the current level
    for widths in top_k_spec:
        nxt = []
        for j, u in enumerate(level):
            kids = tree.children(wide_ids[u])  # tree order among siblings = draft rank order
            if kids.shape[0] < widths[j]:
                return None
            for r in range(widths[j]):
                wide_ids.append(int(kids[r]))
                parents.append(u)
                nxt.append(len(wide_ids) - 1)
        level = nxt
    return np.asarray(wide_ids), np.asarray(parents)


def walk_moments(parents: np.ndarray, depths: np.ndarray, own_logp: np.ndarray) -> tuple[float, float]:
    """E[L], Var[L] of the sampling walk: P(reach n) = prod exp(own_logp) along root -> n."""
    reach = np.ones(parents.shape[0])
    for u in range(1, reach.shape[0]):
        reach[u] = reach[parents[u]] * math.exp(own_logp[u])
    mean = float(reach[1:].sum())
    return mean, float((reach[1:] * (2 * depths[1:] - 1)).sum() - mean * mean)


def check_narrow(narrow) -> None:
    level_nodes = 1
    for i, widths in enumerate(narrow.top_k_spec):
        if len(widths) != level_nodes:
            raise SystemExit(
                f"--narrow: step {i} has {len(widths)} widths for {level_nodes} level nodes; "
                "the narrow tree must expand every node of each level (no selection)"
            )
        level_nodes = sum(widths)


def run_live(args, config: str, out: Path, prompts: Path) -> float:
    models = ["--draft", args.draft, "--target", args.target] if args.draft else ["--pair", args.pair]
    argv = ["generate", *models, "--models-dir", args.models_dir, "--config", config]
    argv += ["--prompts", str(prompts), "--max-new-tokens", str(args.max_new_tokens)]
    argv += ["--temperature", str(args.temperature), "--seed", str(args.seed), "--repeats", "1"]
    argv += ["--threads", str(args.threads), "--no-progress", "--replace", "-o", str(out)]
    start = time.perf_counter()
    if specreplay(argv) != 0:
        raise SystemExit(f"generate --config {config} failed")
    return time.perf_counter() - start


def recorded(run: Path):
    manifest = json.loads((run / "manifest.json").read_text())
    live = {tuple(r["key"]): r["accepted_length"] for r in manifest["rounds"]}
    rep = replay_directory(run, ReplayOptions())
    rounds = []
    for res in rep.results:
        v = read_matrix(run / f"validate_{res.key[0]}_{res.key[1]}.npz", "validate")
        rounds.append((res.tree, v, live[res.key]))
    return manifest, rounds


def mean_ci(values) -> tuple[float, float]:
    """(mean, half-width of the 95 % normal interval)."""
    x = np.asarray(values, dtype=np.float64)
    return float(x.mean()), float(1.96 * x.std(ddof=1) / math.sqrt(x.shape[0])) if x.shape[0] > 1 else math.inf


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for the two dumps and result.json")
    p.add_argument("--pair", default="qwen2.5-coder")
    p.add_argument("--models-dir", default=str(Path.home() / ".cache/specreplay/models"))
    p.add_argument("--draft", help="instead of --pair: the draft model (with --target)")
    p.add_argument("--target", help="instead of --pair: the target model (with --draft)")
    p.add_argument("--prompts", help="instead of the standard prompts: a prompts file (generate --prompts)")
    p.add_argument("--wide", default="[4]|[2,2]|[1,1]")
    p.add_argument("--narrow", default="[2]|[1,1]")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--repeat", type=int, default=4, help="times each standard prompt is run (independent draws)")
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args(argv)
    narrow = parse_spec(args.narrow, "--narrow").tree
    check_narrow(narrow)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prompts = out / "prompts.txt"
    lines = Path(args.prompts).read_text().splitlines() if args.prompts else [q.text for q in std_prompts()]
    prompts.write_text("".join(" ".join(q.split()) + "\n" for q in lines if q.strip()) * args.repeat)

    wide_s = run_live(args, args.wide, out / "wide", prompts)
    manifest, wide_rounds = recorded(out / "wide")
    col = manifest["node_logprob_temperatures"].index(args.temperature)
    own_e, own_var, own_a, pred, left_out = [], [], [], [], 0
    for tree, v, accepted in wide_rounds:
        e, var = walk_moments(tree.parents, tree.depths, v.node_logp[:, col])
        own_e.append(e)
        own_var.append(var)
        own_a.append(accepted)
        sub = narrow_nodes(tree, narrow.top_k_spec)
        if sub is None:
            left_out += 1
            continue
        ids, parents = sub
        depths = tree.depths[ids]
        pred.append(walk_moments(parents, depths, v.node_logp[ids, col])[0])
    z = (sum(own_a) - sum(own_e)) / math.sqrt(sum(own_var))

    narrow_s = run_live(args, args.narrow, out / "narrow", prompts)
    _, narrow_rounds = recorded(out / "narrow")
    measured = [a for _, _, a in narrow_rounds]
    (pm, pci), (mm, mci) = mean_ci(pred), mean_ci(measured)
    (wm, wci) = mean_ci(own_a)
    agree = abs(pm - mm) <= math.hypot(pci, mci)
    result = {
        "temperature": args.temperature,
        "seed": args.seed,
        "wide": args.wide,
        "narrow": args.narrow,
        "sequences": len(manifest["sequences"]),
        "wide_rounds": len(wide_rounds),
        "wide_measured": [wm, wci],
        "wide_expected": float(np.mean(own_e)),
        "wide_z": z,
        "predicted_rounds": len(pred),
        "rounds_left_out": left_out,
        "narrow_predicted": [pm, pci],
        "narrow_rounds": len(narrow_rounds),
        "narrow_measured": [mm, mci],
        "agree_within_ci": agree,
        "wall_s": {"wide": wide_s, "narrow": narrow_s},
    }
    (out / "result.json").write_text(json.dumps(result, indent=1))
    wide, thin = (c.replace("|", "\\|") for c in (args.wide, args.narrow))  # "|" would split a cell
    print("| T | tree | rounds | mean accepted length (95 % CI) |\n|---|---|---|---|")
    print(f"| {args.temperature} | wide {wide}, measured | {len(wide_rounds)} | {wm:.3f} ± {wci:.3f} |")
    print(
        f"| {args.temperature} | wide, expected from its own dump (z = {z:.2f}) | {len(wide_rounds)} | {np.mean(own_e):.3f} |"
    )
    print(f"| {args.temperature} | narrow {thin}, predicted from the wide dump | {len(pred)} | {pm:.3f} ± {pci:.3f} |")
    print(f"| {args.temperature} | narrow, measured live | {len(narrow_rounds)} | {mm:.3f} ± {mci:.3f} |")
    print(f"agree within CIs: {'yes' if agree else 'NO'}; wide rounds left out (narrow nodes not expanded): {left_out}")
    return 0 if agree and abs(z) < 4 else 1


if __name__ == "__main__":
    sys.exit(main())
