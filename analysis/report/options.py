"""What a report shows (ReportOptions), and the tree configs its comparison and temperature curve
replay on each run: the given ones, or a default set an engineer would try first, the recorded
config first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from analysis.compare.gamma_strategies import STRATEGY_NAMES
from analysis.compare.sampling import TEMPERATURE_GRID
from analysis.compare.subtree import fit_levels
from analysis.cost.model import CostModel
from analysis.cost.source import RunPricing
from analysis.tables.runs import LabelledRun
from replay.core.config import TreeConfig, distinct_configs
from replay.io.dumpnames import Key
from replay.io.skipped import Skipped

# the memory the batches of the report's runs may take, kept from their loading (analysis.tables.runs:
# LabelledRun.batches) for the comparison, the recommendation and tables/, which then read nothing
# again; ~0.5 GB for a packed run of 10^6 article rounds. Beyond it each of them reads the run again.
LOADED_BYTES = 1 << 30


@dataclass(frozen=True)
class ReportOptions:
    configs: Sequence[TreeConfig] | None = None  # configs to compare offline; None: default_comparison_configs
    cost: CostModel | None = None  # None: each run's own (analysis.cost.source: measured timings, else the default)
    strategies: Sequence[int] = tuple(STRATEGY_NAMES)
    ema_window: int | None = None  # None: the run's emaWindow setting, else 1
    gamma_threshold: float | None = None  # None: each config's own
    decode: Callable[[int], str] | None = None  # token text for the round pictures
    image_format: str = "png"  # "png" (base64) or "svg" (inline)
    title: str = "specreplay report"
    budget: int | None = None  # tree-shape recommendation node budget; None: the recorded config's nodes
    max_depth: int | None = None  # its depth cap; None: the recorded gamma
    recommend: bool = True  # include the tree-shape recommendation
    example_round: Key | None = (
        None  # round to draw per run; None: a typical failing round (analysis.report.example_round)
    )
    sampling: bool = True  # the temperature curve, for every run whose validate rows carry scores
    temperatures: Sequence[float] = TEMPERATURE_GRID  # its grid
    vocab_size: int | None = None  # the target's vocabulary size: lower bounds at T > 1
    # progress(phase name) -> that phase's progress(done, total): a bar per run and phase
    # (replay.util.progress.phase_progress), as one phase can take a minute on a large run
    progress: Callable[[str], Callable[[int, int], None]] | None = field(default=None, compare=False)
    # on_skipped(run label, one entry per round): the rounds the temperature curve left out (besides
    # the page's note), for the CLI to list on stderr with exit status 1 as every --temperature command does
    on_skipped: Callable[[str, list[Skipped]], None] | None = field(default=None, compare=False)
    # on_pricing(run label, its pricing): the cost model the page's speedups use, for the CLI to say the
    # page's cost warning on stderr without pricing the run again
    on_pricing: Callable[[str, RunPricing], None] | None = field(default=None, compare=False)


def default_comparison_configs(cfg: TreeConfig) -> list[TreeConfig]:
    """The recorded config and a few contained ones an engineer would try first: shallower
    (each gamma), narrower root, one head per step, and the top-1 chain."""
    out = [cfg]
    for g in range(cfg.gamma - 1, 0, -1):
        out.append(TreeConfig.from_lists(cfg.top_k_spec[:g], cfg.top_head[:g], cfg.tree_type, cfg.gamma_threshold))
    root = cfg.top_k_spec[0][0]
    for w in sorted({max(1, root - 2), max(1, (root + 1) // 2)}, reverse=True):
        if w < root:  # a narrower root feeds fewer parents to step 1: fit_levels drops the heads it no longer has
            out.append(fit_levels([[w], *cfg.top_k_spec[1:]], cfg.top_head, cfg))
    if any(h > 1 for h in cfg.top_head):
        out.append(
            TreeConfig.from_lists([[r[0]] for r in cfg.top_k_spec], [1] * cfg.gamma, cfg.tree_type, cfg.gamma_threshold)
        )
    out.append(TreeConfig.from_lists([[1]] * cfg.gamma, [1] * cfg.gamma, cfg.tree_type, cfg.gamma_threshold))
    return distinct_configs(out)


def run_configs(run: LabelledRun, opts: ReportOptions) -> list[TreeConfig]:
    """The configs a run's comparison (and temperature curve) shows: ``opts.configs`` replace the
    default set; the run's own config first, as every table starts from what was recorded."""
    if not opts.configs:
        return default_comparison_configs(run.config)
    return distinct_configs([run.config, *opts.configs])
