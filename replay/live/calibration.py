"""Steps 1 and 2 of ``generate --config auto``: the pair's cost curve and a short speculative run of
a wide tree (the calibration run), whose dump the analysis replays to predict every shape
(analysis.shapes.auto_choice; the CLI joins the two: replay.cli.live_auto).

What stays in the run's directory so that every printed number can be recomputed:
docs/live-harness.md, "generate --config auto". Importing this module stays torch-free, so that the
CLI checks its options before loading torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from replay.core.config import TreeConfig

from .sweep.directory import COST_CURVE_FILE
from .timing import Clock

if TYPE_CHECKING:
    from .costs import CostCurve
    from .generate import DecodeOptions
    from .models.load import LiveModel

# Width 6 at the root, two heads below, then a chain to depth 6: the shapes it contains (and can
# therefore replay exactly) include every chain up to depth 6, the narrow trees a CPU can afford
# and the article's tree (6,2x2,1x1). A calibration round costs about one 16-token forward.
CALIBRATION_TREE = "6,2x2,1x1,1,1,1"
CALIBRATION_PROMPTS = 2  # the first prompts of the run
CALIBRATION_TOKENS = 24  # new tokens per calibration prompt (fewer when the run asks for fewer)
CALIBRATION_DIR = "calibration"  # inside the run's directory
CURVE_FILE = COST_CURVE_FILE  # analysis.cost.source finds it beside the run's dump
CURVE_REPEATS = 2


def curve_sizes(nodes: int) -> list[int]:
    """Token counts to time: every count up to 6 (chains and narrow trees), then a sparser grid up
    to ``nodes + 1`` (the calibration tree's own forward), the largest always included."""
    top = nodes + 1
    return sorted({*range(1, min(6, top) + 1), *(n for n in (8, 12, 16, 24, 32) if n < top), top})


def measure_calibration_curve(
    draft: LiveModel, target: LiveModel, tree: TreeConfig, out: str | Path, clock: Clock | None = None
) -> CostCurve:
    """Step 1: the pair's cost curve at curve_sizes of the calibration ``tree``, written to OUT/CURVE_FILE."""
    from .costs import measure_cost_curve, write_cost_curve

    curve = measure_cost_curve(target, draft, curve_sizes(tree.num_nodes), repeats=CURVE_REPEATS, clock=clock)
    write_cost_curve(Path(out) / CURVE_FILE, curve)
    return curve


def run_calibration(
    draft: LiveModel,
    target: LiveModel,
    prompts: Sequence[Sequence[int]],
    options: DecodeOptions,
    out: str | Path,
    tree: TreeConfig,
    prompts_used: int = CALIBRATION_PROMPTS,
    tokens: int = CALIBRATION_TOKENS,
) -> Path:
    """Step 2: ``tree`` run on the first ``prompts_used`` prompts for at most ``tokens`` new tokens
    each; its dump and manifest go to OUT/CALIBRATION_DIR, which is returned."""
    from .generate import DecodeOptions
    from .run import run_speculative, save_run_manifest

    calib_dir = Path(out) / CALIBRATION_DIR
    calib_dir.mkdir(parents=True, exist_ok=True)
    calib_opts = DecodeOptions(
        min(tokens, options.max_new_tokens), options.temperature, options.seed, options.record_k, options.eos_token_id
    )
    used = list(prompts[: max(1, prompts_used)])
    generations = run_speculative(draft, target, used, tree, calib_opts, calib_dir)
    save_run_manifest(calib_dir, tree, draft, target, calib_opts, generations, extra={"auto": "calibration run"})
    return calib_dir
