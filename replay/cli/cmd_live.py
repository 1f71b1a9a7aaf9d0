"""CLI: ``specreplay generate`` and ``specreplay cost-curve``, and the model, decoding and output options
every live command shares (``sweep`` is in cmd_sweep.py).

torch and transformers are imported inside the command functions only, so ``specreplay --help``
and the offline commands never load them. Each command first checks its options and resolves the
model names (stdlib), then checks that the live packages are installed (one line saying what to
install when not), and only then imports them.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from replay.live.extras import require_live_packages
from replay.util.file_formats import FileFormats
from replay.util.pathcheck import input_file, output_dir, output_file
from replay.util.progress import progress_bar, progress_enabled
from replay.util.words import counted

from .options import (
    JSON_FORMATS,
    RUNS_ONLY,
    add_command,
    add_no_progress,
    add_output,
    note_on_stderr,
    note_written,
    print_notes,
)

GENERATE_EXAMPLE = """example:
  mkdir -p runs   # an output is made only in an existing directory
  specreplay generate --pair qwen2.5-coder --models-dir /work/models --config tree.json \\
      --prompts prompts.txt --max-new-tokens 48 -o runs/r1 --baseline
  (--pair NAME = --draft NAME-0.5b --target NAME-1.5b; short names resolve in --models-dir,
   else $SPECREPLAY_MODELS, else ~/.cache/specreplay/models: see `specreplay models list`)
  specreplay generate --draft models/qwen2.5-0.5b --target models/qwen2.5-1.5b \\
      --config tree.json --prompts prompts.txt --max-new-tokens 64 -o runs/r1 --baseline
  (--prompts: text lines, encoded with the target's tokenizer, or JSON Lines of token ids
   {"prompt_ids": [...]} / [...] for models without one; GGUF: --target path/to/model.gguf)
  (-o/--output must be new or empty; add --replace to swap the finished run in over an old one)
  (timing: a warm-up, then --repeats passes; with --baseline the two methods are interleaved per
   prompt in a rotating order; tokens/s and speedup are the median pass, min and max printed)
  specreplay generate --pair qwen2.5-coder --config auto --prompts prompts.txt --max-new-tokens 64 -o runs/auto
  (auto: cost curve + a short calibration run in runs/auto/calibration, the shape with the best
   predicted speedup runs; auto.json holds every prediction, the ceiling and the measured speedup)
"""

COST_EXAMPLE = """example:
  mkdir -p runs   # an output is made only in an existing directory
  specreplay cost-curve --target models/qwen2.5-1.5b --draft models/qwen2.5-0.5b \\
      --sizes 1,2,4,8,16,32,64 -o runs/cost_curve.json --device cuda --dtype bfloat16
  specreplay cost-curve --shape qwen2.5-1.5b --draft-shape qwen2.5-0.5b --device cuda -o cc.json
  (--shape builds a random-weight model of a real architecture: timing only)
"""


def register(subparsers) -> None:
    _register_generate(subparsers)
    _register_cost_curve(subparsers)


def _register_generate(subparsers) -> None:
    gen = add_command(
        subparsers,
        "generate",
        run_generate,
        help="run tree speculative decoding live and write a dump",
        epilog=GENERATE_EXAMPLE,
        exits=RUNS_ONLY,
        description="Decode the prompts with a real draft and target model: the draft builds each round's tree, "
        "the target verifies it in one forward, and every round is written as a dump (draft_step_*, validate_*, "
        "manifest.json with outputs and timings) that every offline command reads.",
    )
    add_model_options(gen)
    gen.add_argument(
        "--config",
        required=True,
        help="tree config in any config form: tree.json, 6,2x2,1x1, [6]|[2,2]|[1,1], [[6],[2,2],[1,1]], inline JSON "
        "(docs/config-grammar.md; the first tree of a specTree list is used), or auto: measure the cost curve, "
        "run a short calibration of a wide tree, pick the shape with the best predicted speedup, run it with "
        "--baseline and print predicted vs measured (docs/live-harness.md)",
    )
    add_decode_options(gen)
    add_made_output(
        gen, output_dir, "dump directory (draft_step_*/validate_* .npz + manifest.json); must be new or empty"
    )
    gen.add_argument(
        "--replace",
        action="store_true",
        help="replace a non-empty -o/--output: the new run is written beside it and swapped in when it finishes. "
        "There is no --resume: a run's numbers (tokens/s, speedup) are measured in one process; "
        "`specreplay sweep` resumes per config",
    )
    gen.add_argument(
        "--baseline",
        action="store_true",
        help="also run target-only decoding, interleaved: measured speedup (end to end and decode only), identical outputs",
    )
    add_repeats_option(gen)
    add_no_progress(gen)


def _register_cost_curve(subparsers) -> None:
    cc = add_command(
        subparsers,
        "cost-curve",
        run_cost_curve,
        help="time one target forward against tokens verified",
        epilog=COST_EXAMPLE,
        exits=RUNS_ONLY,
        description="Time one target forward (and, with a draft, one draft step) against the number of tokens "
        "verified at once, on a cache of --prefix committed tokens, and write the curve as JSON: the cost model "
        "of compare, report and recommend (--cost).",
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
    cc.add_argument("--sizes", default="1,2,4,8,16,32,64", help="tokens per forward, comma separated")
    cc.add_argument("--prefix", type=int, default=64, help="committed tokens in the cache")
    cc.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed passes after a warm-up, the sizes' order rotated per pass; median, min and max kept",
    )
    add_made_output(cc, output_file, "where to write the cost curve JSON", metavar="FILE", formats=JSON_FORMATS)
    add_no_progress(cc)  # transformers' model-loading bars


def add_model_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--draft", help="draft model: Hugging Face directory, .gguf file or short name (qwen2.5-coder-0.5b)")
    p.add_argument(
        "--target", help="target model: Hugging Face directory, .gguf file or short name (qwen2.5-coder-1.5b)"
    )
    p.add_argument("--pair", help="both models by pair name (qwen2.5-coder), instead of --draft/--target")
    _models_dir_arg(p)
    _device_args(p)
    p.add_argument("--prompts", required=True, type=input_file, help="text lines, or JSON Lines of token ids")


def add_repeats_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed passes after a warm-up; methods interleaved per prompt, median and range reported (default %(default)s)",
    )


def add_made_output(
    p: argparse.ArgumentParser,
    type: Callable[[str], str],
    help: str,
    metavar: str = "DIR",
    formats: FileFormats | None = None,
) -> argparse.Action:
    """The required ``-o/--output`` of the live commands (generate, cost-curve, sweep), stored in
    ``out``; ``--out`` is their old spelling."""
    return add_output(p, type, help, dest="out", metavar=metavar, required=True, aliases=["--out"], formats=formats)


def _models_dir_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--models-dir",
        help="where short names are looked up (default: $SPECREPLAY_MODELS, else ~/.cache/specreplay/models)",
    )


def _device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", default="cpu", help="cpu or cuda")
    p.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help="dtype of both models"
    )
    p.add_argument(
        "--draft-dtype",
        choices=["float32", "bfloat16", "float16"],
        help="the draft's own dtype (default: bfloat16 under a float32 target where bfloat16 is fast - CUDA, CPUs with avx512_bf16 or AMX - else --dtype)",
    )
    p.add_argument(
        "--threads", type=int, help="CPU threads for torch (default: torch's choice; 1 is steadiest on small VMs)"
    )


def add_decode_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-new-tokens", type=int, required=True, help="tokens to generate per prompt")
    p.add_argument(
        "--temperature", type=float, default=0.0, help="0 = greedy; > 0 samples losslessly (default: %(default)s)"
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the sampling draws, >= 0: sequence i draws from numpy default_rng(SeedSequence([seed, i])), "
        "so a repeated prompt gives independent samples and the same seed the same outputs (default %(default)s)",
    )
    p.add_argument(
        "--stop-at-eos",
        action="store_true",
        help="stop a sequence after the tokenizer's EOS token (refused when the target's tokenizer has none)",
    )
    p.add_argument(
        "--record-k",
        type=int,
        help="candidate columns recorded per dump row (default: the config's widest topKSpec entry)",
    )


def resolve_pair(args):
    """What fails in a second, before torch is imported: the run options, both model names (a
    missing model names the fetch command to run), the prompts file, then the live packages."""
    from replay.live.models.names import require_both, resolve_model_args

    check_run_options(args)
    paths = require_both(resolve_model_args(args.draft, args.target, args.pair, args.models_dir))
    check_prompts_file(args)
    require_live_packages()
    return paths


def load_pair(args, paths):
    # Said before torch is imported: a real pair takes a minute or more to load, with nothing else on
    # stderr unless it is a terminal (transformers' bars, replay.util.progress).
    note_on_stderr(f"loading target {paths.target} and draft {paths.draft} ({args.device})")
    from replay.live.models.load import load_pair

    _check_device(args)
    return load_pair(
        paths.draft, paths.target, args.device, args.dtype, args.draft_dtype, progress_enabled(args.no_progress)
    )


def _check_device(args) -> None:
    """Refuse a missing GPU up front; apply --threads before any model is built."""
    from replay.live.models.load import prepare_device

    prepare_device(args.device, args.threads, f"--device {args.device}", "this machine")


def check_run_options(args) -> None:
    """The numbers of a generate or sweep run, checked before any model loads (a mistake found
    after a 1.5B model has loaded costs the user that load)."""
    from replay.live.errors import PromptError

    if args.max_new_tokens < 1:
        raise PromptError(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}")
    if args.seed < 0:
        raise PromptError(f"--seed must be >= 0 (it seeds numpy SeedSequence), got {args.seed}")
    # 0 is the only greedy spelling: a negative or NaN temperature is refused here, before any model loads.
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise PromptError(
            f"--temperature must be a finite number >= 0 (0 = greedy, > 0 samples), got {args.temperature}"
        )
    check_repeats(args.repeats)
    check_threads(args.threads)


def check_repeats(repeats: int) -> None:
    from replay.live.errors import PromptError

    if repeats < 1:
        raise PromptError(f"--repeats must be at least 1 (timed passes after the warm-up), got {repeats}")


def check_threads(threads: int | None) -> None:
    from replay.live.errors import PromptError

    if threads is not None and threads < 1:
        raise PromptError(f"--threads must be at least 1, got {threads}")


def check_prompts_file(args) -> None:
    """What the prompts file can show without the target's tokenizer (empty, a bad JSON line, an
    id prompt too short), before any model loads; the prompts are read again, encoded, after."""
    from replay.live.prompts import read_prompt_lines

    read_prompt_lines(args.prompts)


def decode_options(args, target):
    from replay.live.errors import PromptError
    from replay.live.generate import DecodeOptions

    eos = getattr(target.tokenizer, "eos_token_id", None) if args.stop_at_eos else None
    if args.stop_at_eos and eos is None:  # else it would do nothing: every sequence runs to --max-new-tokens
        what = getattr(target, "name", None) or args.target or args.pair
        raise PromptError(f"--stop-at-eos: the target {what} has no tokenizer with an EOS token; drop --stop-at-eos")
    return DecodeOptions(args.max_new_tokens, args.temperature, args.seed, args.record_k, eos)


def token_progress_bar(args, total: int, desc: str):
    return progress_bar(total, desc, progress_enabled(args.no_progress), unit="tok", leave=False)


def generate_config(text: str):
    """``generate --config``'s value as a SpecConfig (replay.core.config_grammar): parsed before torch
    loads; None for ``auto`` (the shape is chosen after a calibration run: live_auto)."""
    from replay.core.config_grammar import config_key_warnings, parse_spec

    from .live_auto import is_auto

    if is_auto(text):
        return None
    spec = parse_spec(text, "--config")
    print_notes(config_key_warnings(spec, "--config"))
    return spec


def run_generate(args) -> int:
    from .live_auto import calibrate, check_auto_options, choice_lines, measured_line, write_choice

    spec = generate_config(args.config)  # bad input fails before torch is imported
    if spec is None:
        check_auto_options(args.temperature)
    paths = resolve_pair(args)
    from replay.live.dumps import staged_output_dir
    from replay.live.prompts import read_prompts
    from replay.live.report import format_summary, generation_headline
    from replay.live.run import run_timed, save_run_manifest

    if spec is not None and len(spec.trees) > 1:
        note_on_stderr(f"note: {args.config} lists {len(spec.trees)} trees; using the first")
    choice = None
    # Entering checks -o/--output, before any model loads; the run lands there only once it is whole.
    with staged_output_dir(args.out, args.replace) as out:
        draft, target = load_pair(args, paths)
        prompts = read_prompts(args.prompts, target.tokenizer)
        options = decode_options(args, target)
        if spec is None:  # auto: its measured speedup needs the baseline
            choice = calibrate(draft, target, prompts, options, out)
            print("\n".join(choice_lines(choice)))
        tree, baseline = (spec.tree, args.baseline) if choice is None else (choice.config, True)
        methods = 2 if baseline else 1
        with token_progress_bar(args, len(prompts) * options.max_new_tokens * methods, "first timed pass") as bar:
            timed = run_timed(draft, target, prompts, tree, options, args.repeats, baseline, out, bar.update)
        comparison = timed.comparison(options.temperature)
        save_run_manifest(out, tree, draft, target, options, timed.generations, comparison, timed.timing)
        if choice is not None:
            write_choice(out, choice, comparison.speedup)
        speedups = speedup_lines(out) if comparison is not None else None
    print(format_summary(timed.summary, comparison, timed.timing, speedups, generation_headline(timed.generations)))
    if choice is not None:
        print(measured_line(choice, comparison.speedup))
    note_written(args.out, f"the dump ({counted(timed.summary.rounds, 'round')})")
    return 0


def speedup_lines(run_dir) -> list[str] | None:
    """The measured speedups of the manifest just written, read back by analysis.cost.timings: the same
    words and numbers ``compare`` shows for this run (end to end, prefill included: the harness's
    speedup; decode only, prefill excluded)."""
    from analysis.cost.timings import run_speedup
    from replay.io.manifest import read_manifest

    speed = run_speedup(run_dir, read_manifest(run_dir))
    return None if speed is None else speed.summary_lines()


def run_cost_curve(args) -> int:
    from replay.live.models.names import resolve_model_args

    paths = resolve_model_args(args.draft, args.target, args.pair, args.models_dir)  # before torch is imported
    sizes = _sizes(args.sizes)
    check_repeats(args.repeats)
    check_threads(args.threads)
    if args.prefix < 0:
        from replay.live.errors import SweepError

        raise SweepError(f"--prefix must be >= 0 (committed tokens in the cache), got {args.prefix}")
    require_live_packages()
    from replay.live.costs import measure_cost_curve, write_cost_curve

    _check_device(args)
    # Timing needs no tokenizer: skip rebuilding one from GGUF metadata (~12 s per model).
    bars = progress_enabled(args.no_progress)
    target = _model_or_shape(paths.target, args.shape, args.device, args.dtype, bars)
    draft = None
    if paths.draft is not None or args.draft_shape:
        from replay.live.models.load import default_draft_dtype

        draft_dtype = args.draft_dtype or default_draft_dtype(args.device, args.dtype)
        draft = _model_or_shape(paths.draft, args.draft_shape, args.device, draft_dtype, bars)
    curve = measure_cost_curve(target, draft, sizes, args.prefix, args.repeats)
    write_cost_curve(args.out, curve)
    for n, s in zip(curve.tokens, curve.verify_s):
        print(f"{n:4d} tokens  {s * 1e3:9.3f} ms")
    if curve.draft_step_s is not None:
        print(f"draft step (1 token): {curve.draft_step_s * 1e3:.3f} ms")
    note_written(args.out, f"the cost curve ({counted(len(curve.tokens), 'size')})")
    return 0


def _sizes(text: str) -> list[int]:
    from replay.live.errors import SweepError

    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SweepError(f"--sizes {text}: expected comma-separated token counts, e.g. 1,2,4,8") from None
    if not sizes or min(sizes) < 1:
        raise SweepError(f"--sizes {text}: expected comma-separated token counts of at least 1")
    return sizes


def _model_or_shape(path: str | None, shape: str | None, device: str, dtype: str, progress: bool):
    from replay.live.errors import ModelLoadError
    from replay.live.models.load import load_model
    from replay.live.models.random_weights import REAL_SHAPES, build_model

    if path:
        return load_model(path, device, dtype, tokenizer=None, progress=progress)
    if shape not in REAL_SHAPES:
        raise ModelLoadError(f"--shape {shape!r}: expected one of {', '.join(REAL_SHAPES)}")
    return build_model(REAL_SHAPES[shape], seed=0, dtype=dtype, device=device, name=f"random:{shape}")
