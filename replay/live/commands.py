"""CLI: ``specreplay generate``, ``specreplay sweep``, ``specreplay cost-curve``.

torch and transformers are imported inside the command functions only, so ``specreplay --help``
and the offline commands never load them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

GENERATE_EXAMPLE = """example:
  specreplay generate --pair qwen2.5-coder --models-dir /work/models --config tree.json \\
      --prompts prompts.txt --max-new-tokens 48 --out runs/r1 --baseline
  (--pair NAME = --draft NAME-0.5b --target NAME-1.5b; short names resolve in --models-dir,
   else $SPECREPLAY_MODELS, else ~/.cache/specreplay/models: see `specreplay models list`)
  specreplay generate --draft models/qwen2.5-0.5b --target models/qwen2.5-1.5b \\
      --config tree.json --prompts prompts.txt --max-new-tokens 64 --out runs/r1 --baseline
  (--prompts: text lines, encoded with the target's tokenizer, or JSON Lines of token ids
   {"prompt_ids": [...]} / [...] for models without one; GGUF: --target path/to/model.gguf)
  (timing: a warm-up, then --repeats passes; with --baseline the two methods are interleaved per
   prompt in a rotating order; tokens/s and speedup are the median pass, min and max printed)
"""

SWEEP_EXAMPLE = """grid syntax: configs separated by ';', steps by ',', the widths of one step's
expanded heads by 'x'; '|' lists alternatives for a step (every combination runs), '@T' sets
gammaThreshold (dynamic depth: drafting stops when the best path's draft probability falls below T),
'@T1|T2' runs one config per threshold. "6,2x2,1x1" = topKSpec [[6],[2,2],[1,1]], topHead [1,2,2];
"1,1,1,1" = a chain; "1,1,1,1,1,1@0|0.3|0.5" = a depth-6 chain without and with two thresholds.

timing: each config runs with target-only decoding on the same prompts, a warm-up first, then
--repeats passes, the two interleaved per prompt in a rotating order; tokens/s and speedup are the
median pass (min and max in the table).

example:
  specreplay sweep --draft models/draft --target models/target --prompts prompts.jsonl \\
      --grid "6,2x2,1x1;4,2x1,1;2|4,1x1;1,1,1,1@0|0.4" --max-new-tokens 64 --out runs/sweep1
  (after an interruption add --resume: finished configs are kept, not redone)
"""

COST_EXAMPLE = """example:
  specreplay cost-curve --target models/qwen2.5-1.5b --draft models/qwen2.5-0.5b \\
      --sizes 1,2,4,8,16,32,64 --out runs/cost_curve.json --device cuda --dtype bfloat16
  specreplay cost-curve --shape qwen2.5-1.5b --draft-shape qwen2.5-0.5b --device cuda --out cc.json
  (--shape builds a random-weight model of a real architecture: timing only)
"""


def register(subparsers) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    gen = subparsers.add_parser(
        "generate", help="run tree speculative decoding live and write a dump", epilog=GENERATE_EXAMPLE, formatter_class=fmt
    )
    _model_args(gen)
    gen.add_argument("--config", required=True, help="tree config JSON (the first tree of a specTree list is used)")
    _decode_args(gen)
    gen.add_argument("--out", required=True, help="dump directory (draft_step_*/validate_* .npz + manifest.json)")
    gen.add_argument("--baseline", action="store_true", help="also run target-only decoding: speedup, identical outputs")
    _repeats_arg(gen)
    gen.set_defaults(func=cmd_generate)

    sw = subparsers.add_parser("sweep", help="run many tree configs live: table, plots, resumable", epilog=SWEEP_EXAMPLE, formatter_class=fmt)
    _model_args(sw)
    which = sw.add_mutually_exclusive_group(required=True)
    which.add_argument("--grid", help="tree configs in the grid syntax below")
    which.add_argument("--configs", help="JSON file with a list of tree configs")
    _decode_args(sw)
    sw.add_argument("--out", required=True, help="sweep directory (dumps/, results.csv/.parquet, plots/)")
    sw.add_argument("--resume", action="store_true", help="continue the sweep in --out: finished configs are kept, the rest run")
    _repeats_arg(sw)
    sw.add_argument("--no-cost-curve", action="store_true", help="skip measuring cost_curve.json")
    sw.set_defaults(func=cmd_sweep)

    cc = subparsers.add_parser(
        "cost-curve", help="time one target forward against tokens verified", epilog=COST_EXAMPLE, formatter_class=fmt
    )
    src = cc.add_mutually_exclusive_group(required=True)
    src.add_argument("--target", help="target model: Hugging Face directory, .gguf file or short name")
    src.add_argument("--shape", help="random weights in a real architecture: qwen2.5-0.5b or qwen2.5-1.5b")
    src.add_argument("--pair", help="a fetched draft/target pair by name (qwen2.5-coder): times both")
    dsrc = cc.add_mutually_exclusive_group()
    dsrc.add_argument("--draft", help="draft model (optional): also time draft forwards")
    dsrc.add_argument("--draft-shape", help="random-weight draft of a real architecture")
    _models_dir_arg(cc)
    _device_args(cc)
    cc.add_argument("--sizes", default="1,2,4,8,16,32,64", help="tokens per forward, comma separated (default %(default)s)")
    cc.add_argument("--prefix", type=int, default=64, help="committed tokens in the cache (default %(default)s)")
    cc.add_argument(
        "--repeats", type=int, default=3,
        help="timed passes after a warm-up, the sizes' order rotated per pass; median, min and max kept (default %(default)s)",
    )
    cc.add_argument("--out", required=True, help="where to write cost_curve.json")
    cc.set_defaults(func=cmd_cost_curve)


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--draft", help="draft model: Hugging Face directory, .gguf file or short name (qwen2.5-coder-0.5b)")
    p.add_argument("--target", help="target model: Hugging Face directory, .gguf file or short name (qwen2.5-coder-1.5b)")
    p.add_argument("--pair", help="both models by pair name (qwen2.5-coder), instead of --draft/--target")
    _models_dir_arg(p)
    _device_args(p)
    p.add_argument("--prompts", required=True, help="text lines, or JSON Lines of token ids")


def _repeats_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repeats", type=int, default=3,
        help="timed passes after a warm-up; methods interleaved per prompt, median and range reported (default %(default)s)",
    )


def _models_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--models-dir", help="where short names are looked up (default: $SPECREPLAY_MODELS, else ~/.cache/specreplay/models)")


def _device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu or cuda (default %(default)s)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help="dtype of both models (default %(default)s)")
    p.add_argument(
        "--draft-dtype", choices=["float32", "bfloat16", "float16"],
        help="the draft's own dtype (default: bfloat16 under a float32 target where bfloat16 is fast - CUDA, CPUs with avx512_bf16 or AMX - else --dtype)",
    )
    p.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice; 1 is steadiest on small VMs)")


def _decode_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples losslessly")
    p.add_argument("--seed", type=int, default=0, help="seed of the acceptance draws (default %(default)s)")
    p.add_argument("--stop-at-eos", action="store_true", help="stop a sequence after the tokenizer's EOS token")
    p.add_argument("--record-k", type=int, help="candidate columns recorded per dump row (default: the config's widest topKSpec entry)")


def _load_pair(args):
    from .models import load_pair
    from .names import require_both, resolve_model_args

    # Resolve both names before loading anything: a missing file fails now, not after a load.
    paths = require_both(resolve_model_args(args.draft, args.target, args.pair, args.models_dir))
    _check_device(args)
    return load_pair(paths.draft, paths.target, args.device, args.dtype, args.draft_dtype)


def _check_device(args) -> None:
    """Refuse a missing GPU up front; apply --threads before any model is built."""
    import torch

    from .errors import ModelLoadError

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelLoadError(f"--device {args.device}: CUDA is not available on this machine")
    if args.threads is not None:
        torch.set_num_threads(max(1, args.threads))


def _options(args, target):
    from .generate import DecodeOptions

    eos = getattr(target.tokenizer, "eos_token_id", None) if args.stop_at_eos else None
    if args.max_new_tokens < 1:
        from .errors import PromptError

        raise PromptError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    return DecodeOptions(args.max_new_tokens, args.temperature, args.seed, args.record_k, eos)


def _progress_bar(total: int, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="tok", file=sys.stderr, leave=False)


def cmd_generate(args) -> int:
    from ..config import load_config
    from .prompts import read_prompts
    from .report import format_summary
    from .run import run_timed, save_run_manifest

    spec = load_config(args.config)
    if len(spec.trees) > 1:
        print(f"note: {args.config} lists {len(spec.trees)} trees; using the first", file=sys.stderr)
    draft, target = _load_pair(args)
    prompts = read_prompts(args.prompts, target.tokenizer)
    options = _options(args, target)
    methods = 2 if args.baseline else 1
    with _progress_bar(len(prompts) * options.max_new_tokens * methods, "first timed pass") as bar:
        timed = run_timed(draft, target, prompts, spec.tree, options, args.repeats, args.baseline, args.out, bar.update)
    comparison = timed.comparison(options.temperature)
    path = save_run_manifest(args.out, spec.tree, draft, target, options, timed.generations, comparison, timed.timing)
    print(format_summary(timed.summary, comparison, timed.timing))
    print(f"dump:                   {Path(path).parent}")
    return 0


def cmd_sweep(args) -> int:
    from .prompts import read_prompts
    from .sweep import run_sweep

    configs = _sweep_configs(args)
    out = Path(args.out)
    draft, target = _load_pair(args)
    prompts = read_prompts(args.prompts, target.tokenizer)
    options = _options(args, target)
    total = len(prompts) * options.max_new_tokens * 2 * len(configs)  # first timed pass, both methods
    with _progress_bar(total, "sweep") as bar:
        result = run_sweep(
            draft, target, configs, prompts, options, out, args.repeats, args.resume, bar.update, cost_curve=not args.no_cost_curve
        )
    return _report_sweep(result, out)


def _sweep_configs(args):
    from .grid import load_config_list, parse_grid

    if args.grid is None:
        return load_config_list(args.configs)
    configs, skipped = parse_grid(args.grid)
    for s in skipped:
        print(f"skipped grid combination {s}", file=sys.stderr)
    return configs


def _report_sweep(result, out: Path) -> int:
    """Plots (the CLI draws them: the harness never imports analysis), the table, one summary line."""
    from analysis.sweep_plots import plot_sweep

    if len(result.table):
        plot_sweep(result.table, out / "plots")
        cols = ["name", "nodes", "mean_accepted_length", "block_efficiency", "tokens_per_s", "speedup", "speedup_min", "speedup_max"]
        print(result.table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    dup = f", {len(result.duplicates)} finished twice (kept the first)" if result.duplicates else ""
    print(f"{len(result.computed)} config(s) run, {len(result.skipped)} kept from before{dup}; table: {out / 'results.csv'}")
    return 0


def cmd_cost_curve(args) -> int:
    from .costs import measure_cost_curve, write_cost_curve
    from .names import resolve_model_args

    paths = resolve_model_args(args.draft, args.target, args.pair, args.models_dir)
    _check_device(args)
    # Timing needs no tokenizer: skip rebuilding one from GGUF metadata (~12 s per model).
    target = _model_or_shape(paths.target, args.shape, args.device, args.dtype)
    draft = None
    if paths.draft is not None or args.draft_shape:
        from .models import default_draft_dtype

        draft = _model_or_shape(paths.draft, args.draft_shape, args.device, args.draft_dtype or default_draft_dtype(args.device, args.dtype))
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    curve = measure_cost_curve(target, draft, sizes, args.prefix, args.repeats)
    write_cost_curve(args.out, curve)
    for n, s in zip(curve.tokens, curve.verify_s):
        print(f"{n:4d} tokens  {s * 1e3:9.3f} ms")
    if curve.draft_step_s is not None:
        print(f"draft step (1 token): {curve.draft_step_s * 1e3:.3f} ms")
    print(f"written: {args.out}")
    return 0


def _model_or_shape(path: str | None, shape: str | None, device: str, dtype: str):
    from .errors import ModelLoadError
    from .models import load_model
    from .tiny import REAL_SHAPES, build_model

    if path:
        return load_model(path, device, dtype, tokenizer=None)
    if shape not in REAL_SHAPES:
        raise ModelLoadError(f"--shape {shape!r}: expected one of {', '.join(REAL_SHAPES)}")
    return build_model(REAL_SHAPES[shape], seed=0, dtype=dtype, device=device, name=f"random:{shape}")
