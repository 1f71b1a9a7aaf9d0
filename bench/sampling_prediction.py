"""Prediction across shapes at temperature T, on the real pair.

1. Record a WIDE tree live at T with seed S on the standard prompts (replay/live/stdprompts.py,
   each flattened to one line, since a prompts file holds one prompt per line), the list repeated
   ``--repeat`` times (sequence s draws from generate.sequence_rng(S, s): independent draws).
2. Predict offline, from that dump alone, the mean accepted length of a NARROW tree at T: each
   recorded round's narrow tree is the wide tree's nodes of the same (parent, draft rank), and its
   expected accepted length is the sampling walk on them, P(reach n) = prod of p_T(child | parent),
   E[L] = sum P(reach n), with p_T read from the dump's ``node_logprobs`` column at the run's
   temperature: exact, whatever the recorded top-K (docs/dump-format.md, "Node log-probabilities").
3. Run NARROW live on the same prompts, seed and T, and measure its mean accepted length.
4. Compare: prediction (mean of E_i over the wide rounds) against measurement (mean of A_i over
   the narrow rounds), each with a 95 % interval from the rounds' spread and one treating
   sequences as the independent units; and, as checks of the recording, each run against its own
   dump: z = sum(A_i - E_i) / sqrt(sum Var_i), |z| < 4 expected, and the
   top-K-only bounds of replay.core.sampling must contain the exact E_i.

Both trees run in ONE process (the pair loads once: minutes on a loaded CPU), interleaved per
sequence, through the functions ``specreplay generate`` runs (speculative_generate, round_writer,
save_run_manifest; no warm-up pass, since no tokens/s is reported), so ``--stop-after-s`` cuts
both runs at the same sequence. Exit 0 when the CIs agree (by rounds) and both |z| < 4.

NARROW must expand every node of each of its levels (topHead = the level's node count, so no
selection rule decides which): then its tree is determined by the wide round wherever the wide
round expanded those nodes. A round where it did not is counted and left out, never guessed.

    nice -n 10 env PYTHONPATH=. python bench/sampling_prediction.py --out /tmp/sp \\
        --wide '[4]|[2,2]|[1,1]' --narrow '[2]|[1,1]' --temperature 0.7 --max-new-tokens 16 --repeat 4

Models: ``--pair qwen2.5-coder`` in ``--models-dir`` (default ~/.cache/specreplay/models), the
harness's default dtypes (float32 target; ``--draft-dtype`` to choose the draft's). Writes OUT/wide,
OUT/narrow (two dumps every offline command reads) and OUT/result.json; prints a markdown table.
``--wide-only`` runs the z check alone; ``--reuse`` re-analyses the dumps in OUT.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if __package__ in (None, ""):  # run as a script from a checkout without installing
    sys.path.insert(0, str(ROOT))

from replay.core.config_grammar import parse_spec  # noqa: E402
from replay.core.sampling import round_bounds  # noqa: E402
from replay.core.tree import Tree  # noqa: E402
from replay.engine.options import ReplayOptions  # noqa: E402
from replay.io.formats.matrix_io import read_matrix  # noqa: E402
from replay.live.stdprompts import std_prompts  # noqa: E402
from replay.testing.replayer import replay_directory  # noqa: E402


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


def run_live(args, configs: dict, out: Path, prompts: Path, log=print) -> dict:
    """Decode every prompt with each config, in ONE process (the pair loads once: minutes on a
    loaded CPU), interleaved per sequence (sequence s with every config, then s + 1), so a run cut
    short by ``--stop-after-s`` leaves all configs with the same sequences. Sequence s draws from
    generate.sequence_rng(seed, s) whichever config runs it, exactly as ``specreplay generate``
    does; each config's manifest is rewritten after every sequence (no warm-up pass: the bench
    needs the rounds, not tokens/s)."""
    from replay.live.dumps import round_writer
    from replay.live.generate import DecodeOptions, speculative_generate
    from replay.live.models.load import load_pair, prepare_device
    from replay.live.models.names import require_both, resolve_model_args
    from replay.live.prompts import read_prompts
    from replay.live.run import save_run_manifest

    start = time.perf_counter()
    prepare_device("cpu", args.threads, "--threads", "this machine")
    paths = require_both(
        resolve_model_args(args.draft, args.target, None if args.draft else args.pair, args.models_dir)
    )
    draft, target = load_pair(paths.draft, paths.target, "cpu", "float32", args.draft_dtype, False)
    log(f"loaded in {time.perf_counter() - start:.0f} s: draft {draft.dtype_name}, target {target.dtype_name}")
    prompts = read_prompts(prompts, target.tokenizer)
    generations: dict = {name: [] for name in configs}
    wall = dict.fromkeys(configs, 0.0)
    for name in configs:
        shutil.rmtree(out / name, ignore_errors=True)
        (out / name).mkdir(parents=True)
    for s, prompt in enumerate(prompts):
        if args.stop_after_s is not None and time.perf_counter() - start > args.stop_after_s:
            log(f"--stop-after-s {args.stop_after_s}: stopping after {s} of {len(prompts)} sequences")
            break
        for name, (tree, temperature) in configs.items():
            options = DecodeOptions(args.max_new_tokens, temperature, args.seed, None, None)
            t0 = time.perf_counter()
            hook = round_writer(out / name, s)
            g = speculative_generate(draft, target, prompt, tree, options, hook, sequence=s, record=True)
            generations[name].append(g)
            save_run_manifest(out / name, tree, draft, target, options, generations[name])
            wall[name] += time.perf_counter() - t0
            rounds = sum(len(x.rounds) for x in generations[name])
            log(f"sequence {s} {name}: {len(g.rounds)} rounds in {time.perf_counter() - t0:.0f} s; {rounds} in all")
    return wall


def recorded(run: Path):
    manifest = json.loads((run / "manifest.json").read_text())
    live = {tuple(r["key"]): (r["accepted_length"], r["sequence"]) for r in manifest["rounds"]}
    rep = replay_directory(run, ReplayOptions())
    if rep.skipped or len(rep.results) != len(live):
        raise SystemExit(f"{run}: the offline replay skipped rounds of a live dump: {rep.skipped[:3]}")
    rounds = []
    for res in rep.results:
        v = read_matrix(run / f"validate_{res.key[0]}_{res.key[1]}.npz", "validate")
        rounds.append((res.tree, v, *live[res.key]))
    return manifest, rounds


def mean_ci(values, clusters=None, weights=None) -> tuple[float, float]:
    """(mean, half-width of the 95 % normal interval), weighted by ``weights`` if given. With
    ``clusters`` (the sequence of each round) the interval treats sequences, not rounds, as the
    independent units: the rounds of one sequence share its text, so their acceptances are
    correlated (cluster-robust variance of a weighted mean m: G / (G - 1) * sum over sequences of
    (sum of w (x - m))^2 / (sum of w)^2; unweighted and one round per cluster, the usual s^2 / n)."""
    x = np.asarray(values, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    if x.shape[0] < 2:
        return float(x.mean()) if x.shape[0] else math.nan, math.inf
    m = float((w * x).sum() / w.sum())
    g = np.arange(x.shape[0]) if clusters is None else np.unique(np.asarray(clusters), return_inverse=True)[1]
    groups = int(g.max()) + 1
    if groups < 2:
        return m, math.inf
    resid = np.bincount(g, weights=w * (x - m))
    var = groups / (groups - 1) * float((resid * resid).sum()) / float(w.sum()) ** 2
    return m, float(1.96 * math.sqrt(var))


def own_check(rounds, col: int, temperature: float, vocab_size: int | None) -> dict:
    """A run against its own dump: measured mean accepted length (95 % CI, by rounds and by
    sequences), the walk's expectation from the recorded node log-probs, and
    z = sum(A_i - E_i) / sqrt(sum Var_i) (|z| < 4 for a correct harness and recording)."""
    e, var, a, seq, inside, width, outside = [], [], [], [], 0, [], 0.0
    for tree, v, accepted, sequence in rounds:
        m, s2 = walk_moments(tree.parents, tree.depths, v.node_logp[:, col])
        # The top-K rows alone bound the expectation (replay.core.sampling): the exact value from
        # node_logprobs must lie inside, up to the rounding of the float32 scores (an exact bound
        # at T = 1 was measured 1e-4 off the float64 node_logprobs on the real pair: tolerance 5e-4).
        b = round_bounds(tree, v.ids, v.logp, "all", temperature, vocab_size)
        off = max(float(b.expected_lo[0]) - m, m - float(b.expected_hi[0]), 0.0)
        outside = max(outside, off)
        inside += int(off <= 5e-4)
        width.append(float(b.expected_hi[0] - b.expected_lo[0]))
        e.append(m)
        var.append(s2)
        a.append(accepted)
        seq.append(sequence)
    return {
        "rounds": len(rounds),
        "sequences": len(set(seq)),
        "measured": mean_ci(a),
        "measured_by_sequence": mean_ci(a, seq),
        "expected": float(np.mean(e)),
        "z": (sum(a) - sum(e)) / math.sqrt(sum(var)),
        "top_k_bounds_contain_expected": [inside, len(rounds)],
        "top_k_bounds_mean_width": float(np.mean(width)),
        "top_k_bounds_max_outside": outside,
        "expected_per_round": e,
    }


def predict(rounds, narrow, col: int) -> dict:
    """The narrow tree's expected accepted length E_n on each wide round that determines it.

    The plain prediction averages E_n over the wide run's rounds; the live narrow run averages over
    its own rounds, which fall on the text at another density: a tree whose round commits
    1 + L tokens on average visits a stretch of text once per 1 + E[L] tokens. The renewal-weighted
    prediction weights each wide round by (1 + E_w) / (1 + E_n) (E_w: the wide tree's expectation
    there) to stand for the narrow run's rounds instead (a diagnostic, exact only if the text's
    difficulty changes slowly against a round's length)."""
    pred, weight, seq, left_out = [], [], [], 0
    for tree, v, _, sequence in rounds:
        sub = narrow_nodes(tree, narrow.top_k_spec)
        if sub is None:
            left_out += 1
            continue
        ids, parents = sub
        e_n = walk_moments(parents, tree.depths[ids], v.node_logp[ids, col])[0]
        e_w = walk_moments(tree.parents, tree.depths, v.node_logp[:, col])[0]
        pred.append(e_n)
        weight.append((1 + e_w) / (1 + e_n))
        seq.append(sequence)
    return {
        "rounds": len(pred),
        "rounds_left_out": left_out,
        "predicted": mean_ci(pred),
        "predicted_by_sequence": mean_ci(pred, seq),
        "predicted_renewal_weighted_by_sequence": mean_ci(pred, seq, weight),
        "predicted_per_round": pred,
    }


def z_runs(args, wide, out: Path, prompts: Path) -> int:
    """Check 2 alone at several temperatures: the wide tree at each T, interleaved per sequence
    in one process, each run against its own dump (z, top-K bounds). Exit 0 when every |z| < 4."""
    configs = {f"wide_T{t:g}": (wide, t) for t in args.z_temperatures}
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    wall = None if args.reuse else run_live(args, configs, out, prompts, log)
    result = {"wide": args.wide, "seed": args.seed, "max_new_tokens": args.max_new_tokens, "wall_s": wall}
    print("| T | rounds (sequences) | measured mean accepted length ± 95 % CI | expected | z | top-K bounds contain |")
    print("|---|---|---|---|---|---|")
    for name, (_, t) in configs.items():
        manifest, rounds = recorded(out / name)
        col = manifest["node_logprob_temperatures"].index(t)
        o = result[name] = own_check(rounds, col, t, manifest.get("vocab_size"))
        (m, ci), inside = o["measured"], o["top_k_bounds_contain_expected"]
        print(
            f"| {t} | {o['rounds']} ({o['sequences']}) | {m:.3f} ± {ci:.3f} | {o['expected']:.3f} | {o['z']:.2f} | {inside[0]}/{inside[1]} |"
        )
    (out / "result_z.json").write_text(json.dumps(result, indent=1))
    return 0 if all(abs(result[n]["z"]) < 4 for n in configs) else 1


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="directory for the two dumps and result.json")
    p.add_argument("--pair", default="qwen2.5-coder")
    p.add_argument("--models-dir", default=str(Path.home() / ".cache/specreplay/models"))
    p.add_argument("--draft", help="instead of --pair: the draft model (with --target)")
    p.add_argument("--target", help="instead of --pair: the target model (with --draft)")
    p.add_argument("--draft-dtype", help="generate --draft-dtype (default: the harness's own default)")
    p.add_argument("--prompts", help="instead of the standard prompts: a prompts file (generate --prompts)")
    p.add_argument("--wide", default="[4]|[2,2]|[1,1]")
    p.add_argument("--narrow", default="[2]|[1,1]")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--num-prompts", type=int, help="use only the first N prompts (a smoke run)")
    p.add_argument("--repeat", type=int, default=4, help="times each standard prompt is run (independent draws)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--wide-only", action="store_true", help="only the wide run and its own z check (no narrow run)")
    p.add_argument("--stop-after-s", type=float, help="start no new sequence after this many seconds")
    p.add_argument(
        "--z-temperatures",
        type=float,
        nargs="+",
        help="only check 2: the wide tree live at each T, each against its own dump",
    )
    p.add_argument("--reuse", action="store_true", help="analyse the dumps already in --out instead of generating")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    narrow = parse_spec(args.narrow, "--narrow").tree
    check_narrow(narrow)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    prompts = out / "prompts.txt"
    lines = Path(args.prompts).read_text().splitlines() if args.prompts else [q.text for q in std_prompts()]
    lines = [q for q in lines if q.strip()][: args.num_prompts]
    # generate --prompts reads one prompt per text line: each prompt's whitespace runs become one space.
    if not args.reuse:
        prompts.write_text("".join(" ".join(q.split()) + "\n" for q in lines) * args.repeat)
    wide = parse_spec(args.wide, "--wide").tree
    if args.z_temperatures:
        return z_runs(args, wide, out, prompts)
    configs = {"wide": (wide, args.temperature)}
    configs.update({} if args.wide_only else {"narrow": (narrow, args.temperature)})
    wall = (
        None if args.reuse else run_live(args, configs, out, prompts, lambda m: print(m, file=sys.stderr, flush=True))
    )
    manifest, wide_rounds = recorded(out / "wide")
    col = manifest["node_logprob_temperatures"].index(args.temperature)
    result = {
        "temperature": args.temperature,
        "seed": args.seed,
        "wide": args.wide,
        "narrow": args.narrow,
        "max_new_tokens": args.max_new_tokens,
        "models": manifest["models"],
        "wall_s": wall,
        "wide_run": own_check(wide_rounds, col, args.temperature, manifest.get("vocab_size")),
    }
    ok = abs(result["wide_run"]["z"]) < 4
    if not args.wide_only:
        result["narrow_from_wide"] = predict(wide_rounds, narrow, col)
        narrow_manifest, narrow_rounds = recorded(out / "narrow")
        col_n = narrow_manifest["node_logprob_temperatures"].index(args.temperature)
        result["narrow_run"] = own_check(narrow_rounds, col_n, args.temperature, narrow_manifest.get("vocab_size"))
        (pm, pci), (mm, mci) = result["narrow_from_wide"]["predicted"], result["narrow_run"]["measured"]
        result["agree_within_ci"] = abs(pm - mm) <= math.hypot(pci, mci)
        (pm, pci), (mm, mci) = (
            result["narrow_from_wide"]["predicted_by_sequence"],
            result["narrow_run"]["measured_by_sequence"],
        )
        result["agree_within_ci_by_sequence"] = abs(pm - mm) <= math.hypot(pci, mci)
        ok = ok and result["agree_within_ci"] and abs(result["narrow_run"]["z"]) < 4
    (out / "result.json").write_text(json.dumps(result, indent=1))
    print_table(result)
    return 0 if ok else 1


def print_table(r: dict) -> None:
    t = r["temperature"]
    wide, thin = (c.replace("|", "\\|") for c in (r["wide"], r["narrow"]))  # "|" would split a cell
    print("| T | tree | rounds (sequences) | mean accepted length ± 95 % CI by rounds (by sequences) |")
    print("|---|---|---|---|")
    notes = []

    def row(label, n, seqs, mean_ci_rounds, mean_ci_seq):
        (m, ci), (_, ci_s) = mean_ci_rounds, mean_ci_seq
        print(f"| {t} | {label} | {n} ({seqs}) | {m:.3f} ± {ci:.3f} (± {ci_s:.3f}) |")

    for name, label in (("wide_run", f"wide {wide}"), ("narrow_run", f"narrow {thin}")):
        if name not in r:
            continue
        o = r[name]
        row(f"{label}, measured live", o["rounds"], o["sequences"], o["measured"], o["measured_by_sequence"])
        print(f"| {t} | {label}, expected from its own dump: z = {o['z']:.2f} | {o['rounds']} | {o['expected']:.3f} |")
        inside, n = o["top_k_bounds_contain_expected"]
        width = o["top_k_bounds_mean_width"]
        notes.append(
            f"{label}: top-K-only bounds contain the expectation in {inside}/{n} rounds, mean width {width:.3f}"
        )
    if "narrow_from_wide" in r:
        p = r["narrow_from_wide"]
        row(
            f"narrow {thin}, predicted from the wide dump",
            p["rounds"],
            r["wide_run"]["sequences"],
            p["predicted"],
            p["predicted_by_sequence"],
        )
        (m, ci) = p["predicted_renewal_weighted_by_sequence"]
        print(f"| {t} | narrow, predicted, renewal-weighted (diagnostic) | {p['rounds']} | {m:.3f} (± {ci:.3f}) |")
        print(
            f"agree within CIs: by rounds {'yes' if r['agree_within_ci'] else 'NO'}, by sequences "
            f"{'yes' if r['agree_within_ci_by_sequence'] else 'NO'}; wide rounds left out "
            f"(narrow nodes not expanded): {p['rounds_left_out']}"
        )
    print("\n".join(notes))


if __name__ == "__main__":
    sys.exit(main())
