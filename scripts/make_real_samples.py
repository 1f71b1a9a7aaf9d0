"""Real sample dumps: the Qwen2.5-Coder pair (float32, CPU, greedy) on the standard prompts, several
tree configs, both models loaded ONCE for all of them (the CLI would reload per config: minutes).

    PYTHONPATH=. python scripts/make_real_samples.py --max-new-tokens 48 --repeats 1

Each config runs the way `specreplay generate --baseline` runs it (``run.run_timed``): the config
and target-only decoding timed together in this process, a warm-up, then ``--repeats`` passes
interleaved per prompt in a rotating order; the manifest's ``totals.timing`` holds every call, so
its speedup is a measured one (both sides timed in the same minutes on the same machine).

Writes sample_dumps/qwen2.5-coder/<config>/ (npz rounds + manifest.json with the target-only
baseline, identical_to_baseline and the timing session) and sample_dumps/real_prompts.md (the
prompts, their sources and the runs). A config whose manifest already holds a timing session is
kept, so a killed run can be resumed; older dumps (no timing session) are made again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

from replay.core.config import TreeConfig
from replay.live.dumps import staged_output_dir
from replay.live.generate import DecodeOptions
from replay.live.models.load import load_pair, prepare_device
from replay.live.models.names import resolve_model_args
from replay.live.report import format_summary, generation_headline
from replay.live.run import run_timed, save_run_manifest
from replay.live.stdprompts import prompts_markdown, std_prompts

# name -> (topKSpec, topHead); the article's config first.
CONFIGS = {
    "article": ([[6], [2, 2], [1, 1]], [1, 2, 2]),
    "chain4": ([[1], [1], [1], [1]], [1, 1, 1, 1]),
    "wide": ([[8], [3, 3], [2, 2]], [1, 2, 2]),
    "deep": ([[4], [2, 2], [1, 1], [1, 1], [1]], [1, 2, 2, 2, 1]),
}
DTYPE = "float32"  # both models, whatever the CPU: the samples are described as float32


def tree_config(spec: list[list[int]], head: list[int]) -> TreeConfig:
    return TreeConfig(gamma=len(head), top_k_spec=tuple(map(tuple, spec)), top_head=tuple(head))


def is_fair(dump: Path) -> bool:
    """A dump this script made with the current harness: its manifest holds a timing session."""
    path = dump / "manifest.json"
    return path.is_file() and json.loads(path.read_text(encoding="utf-8"))["totals"].get("timing") is not None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def runs_section(out: Path, names: list[str], argv_text: str, loaded_s: float) -> str:
    """The runs' provenance; every number in the table is read back from the manifests written."""
    import torch
    import transformers

    lines = [
        "## The runs\n",
        f"`{argv_text}`\n({time.strftime('%Y-%m-%d')}, {os.cpu_count()}-core {cpu_name()}, torch {torch.__version__}, "
        f"transformers {transformers.__version__}, {torch.get_num_threads()} torch thread(s); both models {DTYPE}, loaded "
        f"once, {loaded_s:.0f} s). Each config ran as `specreplay generate --baseline` runs it: the config and "
        "target-only decoding timed together in one process, a warm-up, then the passes interleaved per prompt "
        "in a rotating order; `totals.timing` in each manifest holds every call and the machine load. Each dump "
        "directory holds `draft_step_*`/`validate_*` `.npz` rounds (ids and log-prob scores of the recorded "
        "columns only, `record_k` = the config's widest entry) and `manifest.json` (config, prompts and outputs, "
        "per-round timings, totals with the baseline and the timing session).\n",
        "| dump | config | nodes | rounds | mean accepted length | block efficiency | draft / verify ms per round "
        "| tokens/s: speculative / target-only | speedup (end to end) | identical to target-only | 1-min load before |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        m = json.loads((out / name / "manifest.json").read_text(encoding="utf-8"))
        t, config = m["totals"], tree_config(*CONFIGS[name])
        shape = config.short().replace("|", "\\|")  # a pipe would end the table cell
        lines.append(
            f"| `{name}` | `{shape}` | {config.num_nodes} | {len(m['rounds'])} | {t['mean_accepted_length']:.2f} "
            f"| {t['block_efficiency']:.2f} | {t['draft_s_per_round'] * 1e3:.0f} / {t['verify_s_per_round'] * 1e3:.0f} "
            f"| {t['tokens_per_s']:.2f} / {t['baseline']['tokens_per_s']:.2f} | {t['speedup']:.3f} "
            f"| {'yes' if t['identical_to_baseline'] else 'NO'} | {t['timing']['load_before']['load_1m']:.2f} |"
        )
    lines.append(
        "\nThe speedup is the harness's: tokens/s over target-only tokens/s, prefill included, the median of "
        "the timed passes (`specreplay compare DUMP` shows it beside the decode-only one). Both sides of a "
        "config were timed in the same minutes, so the ratio is fair; the absolute tokens/s and milliseconds "
        "follow the load of the shared VM (the last column), so compare configs by their speedups, and speed "
        "across machines in `docs/benchmarks.md`."
    )
    return "\n".join(lines) + "\n"


def write_prompts_doc(path: Path, prompts, max_new_tokens: int, runs: str) -> None:
    header = (
        "# Prompts of the real sample dumps\n\n"
        "Built by `replay/live/stdprompts.py` (`std_prompts()`) from text that ships with Python "
        f"{sys.version.split()[0]} and numpy; not chosen or edited for acceptance. Encoded with the "
        "target's tokenizer (no chat template), "
        f"{max_new_tokens} new tokens each, greedy, {DTYPE}, CPU. Sequence index in the dumps = number below - 1.\n"
    )
    path.write_text(prompts_markdown(prompts, header) + "\n" + runs, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pair", default="qwen2.5-coder")
    parser.add_argument("--models-dir", default=None)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed passes per config after the warm-up (as generate)"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1 is steadiest on a small shared VM)"
    )
    parser.add_argument("--out", default="sample_dumps/qwen2.5-coder")
    parser.add_argument("--configs", default=",".join(CONFIGS), help="comma-separated names from CONFIGS")
    args = parser.parse_args(argv)

    paths = resolve_model_args(None, None, args.pair, args.models_dir)
    prepare_device("cpu", args.threads, "--threads", "this machine")
    t0 = time.perf_counter()
    draft, target = load_pair(paths.draft, paths.target, "cpu", DTYPE, DTYPE, progress=False)
    loaded_s = time.perf_counter() - t0
    print(f"loaded pair in {loaded_s:.1f} s", flush=True)
    prompts = std_prompts()
    ids = [list(target.tokenizer.encode(p.text)) for p in prompts]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    options = DecodeOptions(args.max_new_tokens)
    names = args.configs.split(",")
    for name in names:
        dump = out / name
        if is_fair(dump):
            print(f"{name}: kept from before", flush=True)
            continue
        config = tree_config(*CONFIGS[name])
        started = time.perf_counter()
        # Written beside the old dump and swapped in only when whole: a kill leaves the old one.
        with staged_output_dir(dump, replace=True) as staged:
            timed = run_timed(draft, target, ids, config, options, args.repeats, True, staged)
            comparison = timed.comparison(options.temperature)
            save_run_manifest(staged, config, draft, target, options, timed.generations, comparison, timed.timing)
        summary = format_summary(timed.summary, comparison, timed.timing, head=generation_headline(timed.generations))
        print(
            f"== {name} {json.dumps(config.to_json())} ({time.perf_counter() - started:.0f} s)\n{summary}", flush=True
        )
    argv_text = "PYTHONPATH=. python scripts/make_real_samples.py " + " ".join(sys.argv[1:] if argv is None else argv)
    write_prompts_doc(
        out.parent / "real_prompts.md",
        prompts,
        args.max_new_tokens,
        runs_section(out, names, argv_text.strip(), loaded_s),
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
