"""CLI: ``specreplay sweep``: many tree configs live, on this machine or on a Dask cluster.

torch is imported inside the command only (see cmd_live.py); the options are cmd_live's.
"""

from __future__ import annotations

from pathlib import Path

from replay.core.headline import metric_text
from replay.util.pathcheck import output_dir
from replay.util.words import counted

from .cmd_live import (
    add_decode_options,
    add_made_output,
    add_model_options,
    add_repeats_option,
    check_prompts_file,
    check_run_options,
    decode_options,
    load_pair,
    resolve_pair,
    token_progress_bar,
)
from .options import (
    ExitStatus,
    add_command,
    add_no_progress,
    note_written,
    print_grid_skipped,
    print_notes,
)

SWEEP_EXAMPLE = """grid syntax: configs separated by ';', steps by ',', the widths of one step's
expanded heads by 'x'; '|' lists alternatives for a step (every combination runs), '@T' sets
gammaThreshold (dynamic depth: drafting stops when the best path's draft probability falls below T),
'@T1|T2' runs one config per threshold. "6,2x2,1x1" = topKSpec [[6],[2,2],[1,1]], topHead [1,2,2];
"1,1,1,1" = a chain; "1,1,1,1,1,1@0|0.3|0.5" = a depth-6 chain without and with two thresholds.

timing: each config runs with target-only decoding on the same prompts, a warm-up first, then
--repeats passes, the two interleaved per prompt in a rotating order; tokens/s is the median pass
and speedup the median per-pass ratio, measured end to end with prefill included (min and max in
the table).

example:
  mkdir -p runs   # an output is made only in an existing directory
  specreplay sweep --draft models/draft --target models/target --prompts prompts.jsonl \\
      --grid "6,2x2,1x1;4,2x1,1;2|4,1x1;1,1,1,1@0|0.4" --max-new-tokens 64 -o runs/sweep1
  (after an interruption add --resume: finished configs are kept, not redone)

  specreplay sweep --pair qwen2.5-coder --prompts prompts.txt --grid "..." --max-new-tokens 64 \\
      -o /shared/sweep2 --devices cuda:0,cuda:1,cuda:2,cuda:3 --dtype bfloat16
  (a local Dask cluster, one worker process per GPU; --scheduler tcp://host:8786 uses a running
   cluster instead: the output directory and the models at the same path on every worker)

"""


def register(subparsers) -> None:
    sw = add_command(
        subparsers,
        "sweep",
        run_sweep,
        help="run many tree configs live: table, plots, resumable",
        epilog=SWEEP_EXAMPLE,
        exits=ExitStatus(": grid combinations, with the reason", rounds=None),
        description="Decode the same prompts with each tree config in turn (models loaded once) and write one "
        "results row per config (mean acceptance length, draft and per-position acceptance rates, accepted length, "
        "tokens/s, speedup), the results table, "
        "Pareto plots and a cost curve; an interrupted sweep resumes where it stopped.",
    )
    add_model_options(sw)
    which = sw.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--grid",
        help="tree configs separated by ';', each in any config form (docs/config-grammar.md), "
        "with the grid syntax below",
    )
    which.add_argument("--configs", help="a JSON file (or inline JSON) with a list of tree configs")
    add_decode_options(sw)
    add_made_output(sw, output_dir, "sweep directory (dumps/, results.csv/.parquet, plots/)")
    sw.add_argument(
        "--resume",
        action="store_true",
        help="continue the sweep in -o/--output: finished configs are kept, the rest run",
    )
    add_repeats_option(sw)
    sw.add_argument("--no-cost-curve", action="store_true", help="skip measuring cost_curve.json")
    where = sw.add_mutually_exclusive_group()
    where.add_argument(
        "--scheduler", help="run on an existing Dask cluster (tcp://host:8786): one task per config, see docs/scale.md"
    )
    where.add_argument(
        "--workers", type=int, help="start a local Dask cluster of N worker processes (one per device) and run on it"
    )
    sw.add_argument(
        "--devices", help="one device per local worker, comma separated (cuda:0,cuda:1); starts len(devices) workers"
    )
    add_no_progress(sw)


def run_sweep(args) -> int:
    configs, skipped = _sweep_configs(args)  # bad input fails before torch is imported
    out = Path(args.out)
    from replay.live.sweep.directory import check_out

    check_out(out, args.resume)  # before any model loads, as the options
    if args.scheduler or args.workers is not None or args.devices:
        return _sweep_on_cluster(args, configs, out) or (1 if skipped else 0)
    paths = resolve_pair(args)
    from replay.live.prompts import read_prompts
    from replay.live.sweep.runner import run_local_sweep

    draft, target = load_pair(args, paths)
    prompts = read_prompts(args.prompts, target.tokenizer)
    options = decode_options(args, target)
    total = len(prompts) * options.max_new_tokens * 2 * len(configs)  # first timed pass, both methods
    with token_progress_bar(args, total, "sweep") as bar:
        result = run_local_sweep(
            draft,
            target,
            configs,
            prompts,
            options,
            out,
            args.repeats,
            args.resume,
            bar.update,
            cost_curve=not args.no_cost_curve,
        )
    return _report_sweep(result, out) or (1 if skipped else 0)  # skipped grid combinations were listed


def _sweep_on_cluster(args, configs, out: Path) -> int:
    """The client: resolves models and prompts (loads no model), submits one task per config."""
    from contextlib import ExitStack
    from types import SimpleNamespace

    from replay.live.errors import SweepError
    from replay.live.models.names import require_both, resolve_model_args
    from replay.live.prompts import read_prompts
    from replay.live.sweep.cluster import PairSpec, run_sweep_on_cluster, start_local_cluster

    if args.scheduler and args.devices:
        raise SweepError(
            "--devices starts local workers; with --scheduler set each worker's device with SPECREPLAY_DEVICE"
        )
    check_run_options(args)
    paths = require_both(resolve_model_args(args.draft, args.target, args.pair, args.models_dir))
    check_prompts_file(args)
    tokenizer = _TargetTokenizer(paths.target)
    prompts = read_prompts(args.prompts, tokenizer)
    options = decode_options(args, SimpleNamespace(tokenizer=tokenizer))
    absolute = lambda p: str(Path(p).resolve())  # noqa: E731 - workers may start in another directory
    pair = PairSpec(
        absolute(paths.draft), absolute(paths.target), args.device, args.dtype, args.draft_dtype, args.threads
    )
    devices = [d.strip() for d in args.devices.split(",") if d.strip()] if args.devices else None
    with ExitStack() as stack:
        client = stack.enter_context(
            _dask_client(args.scheduler, lambda: stack.enter_context(start_local_cluster(args.workers, devices)))
        )
        bar = stack.enter_context(token_progress_bar(args, len(configs), "sweep"))
        bar.unit = "config"
        result = run_sweep_on_cluster(
            client,
            pair,
            configs,
            prompts,
            options,
            out,
            args.repeats,
            args.resume,
            not args.no_cost_curve,
            lambda _: bar.update(1),
        )
    return _report_sweep(result, out)


def _dask_client(scheduler: str | None, start_cluster):
    from distributed import Client

    from replay.live.errors import SweepError

    if scheduler is None:
        return Client(start_cluster())
    try:
        return Client(scheduler, timeout="20s")
    except (OSError, TimeoutError) as exc:
        raise SweepError(f"--scheduler {scheduler}: cannot connect: {exc}") from None


class _TargetTokenizer:
    """The target's tokenizer, loaded on first use: a cluster's client loads no model and needs the
    tokenizer only for text prompts or --stop-at-eos."""

    _UNSET = object()

    def __init__(self, path: Path):
        self._path = Path(path)
        self._tok = self._UNSET

    def _get(self):
        if self._tok is self._UNSET:
            from replay.live.models.load import load_tokenizer

            gguf = self._path.suffix == ".gguf"
            self._tok = load_tokenizer(self._path.parent if gguf else self._path, self._path.name if gguf else None)
        return self._tok

    def encode(self, text: str) -> list[int]:
        from replay.live.errors import PromptError

        if self._get() is None:
            raise PromptError(f"text prompts need a tokenizer, and {self._path} has none; give JSON Lines of token ids")
        return self._get().encode(text)

    @property
    def eos_token_id(self):
        return getattr(self._get(), "eos_token_id", None)


def _sweep_configs(args):
    from replay.live.sweep.grid import load_config_list, parse_grid

    notes: list[str] = []
    if args.grid is None:
        configs = load_config_list(args.configs, notes)
        print_notes(notes)
        return configs, []
    configs, skipped = parse_grid(args.grid, notes)
    print_notes(notes)
    print_grid_skipped(skipped)
    return configs, skipped


def sweep_display(table):
    """The printed sweep table: vLLM's headline words first (mean acceptance length, draft and
    per-position acceptance rate; per-position as one column "d1 d2 ..."), then speed; the acceptance
    figures as every command prints them (metric_text), the speeds with three decimals."""
    label = (
        "config" if "config" in table.columns else "name"
    )  # the canonical spelling; old tables have only the run name
    shown = table[[label, "nodes", "mean_acceptance_length", "draft_acceptance_rate"]].copy()
    depth_cols = sorted(
        (c for c in table.columns if c.startswith("per_position_acceptance_rate_")),
        key=lambda c: int(c.rsplit("_", 1)[1]),
    )
    shown["per_position_acceptance_rate"] = [
        " ".join(metric_text(v) for v in row if v == v) or "n/a"
        for row in table[depth_cols].itertuples(index=False)  # v == v: not NaN
    ]
    for c in ("mean_accepted_length", "tokens_per_s", "speedup", "speedup_min", "speedup_max"):
        shown[c] = table[c]
    for c in ("mean_acceptance_length", "draft_acceptance_rate", "mean_accepted_length"):
        shown[c] = [metric_text(v) if v == v else "NaN" for v in shown[c]]  # as every command prints them
    return shown


def _report_sweep(result, out: Path) -> int:
    """Plots (the CLI draws them: the harness never imports analysis), the table, one summary line.
    Configs are printed in one spelling, the canonical one (replay.core.config_grammar.format_config); the
    run-name form stays in file names (results.csv's ``name``, DIR/dumps/NAME)."""
    from analysis.report.sweep_plots import plot_sweep

    if len(result.table):
        plot_sweep(result.table, out / "plots")
        print(sweep_display(result.table).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print(
            "speedup: measured end to end (prefill included), the median of the interleaved passes (docs/vocabulary.md)"
        )
        from .live_auto import sweep_prediction_lines

        for line in sweep_prediction_lines(out, result.table):
            print(line)
    dup = f", {len(result.duplicates)} finished twice (kept the first)" if result.duplicates else ""
    print(f"{len(result.computed)} config(s) run, {len(result.skipped)} kept from before{dup}")
    note_written(out / "results.csv", counted(len(result.table), "row"))
    return 0
