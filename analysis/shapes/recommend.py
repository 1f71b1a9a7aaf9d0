"""``recommend``: tree shapes for a node budget from measured acceptance, with proof.

Pipeline: the statistics pass over each dump (analysis.shapes.dumps: batch replay) → count tables →
ShapeModel (analysis.shapes.model) → exact search over configs (analysis.shapes.search) → predicted
vs measured block efficiency: every shape contained in the recorded config is replayed exactly
(analysis.compare.subtree_batch / analysis.compare.subtree); the others need a live run, whose
command line is printed. Text, JSON and the report's HTML section are
analysis.shapes.recommend_render; the CLI is replay.cli.cmd_recommend.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from analysis.cost.model import CostModel
from analysis.tables.intervals import Z95
from analysis.tables.runs import LabelledRun
from replay.core.config import TreeConfig
from replay.engine.batch import RankPath
from replay.engine.options import ReplayOptions
from replay.io.skipped import why_no_rounds
from replay.util.errors import NoRoundsError, SpecReplayError

from .counts import merge_stats
from .dumps import DumpInput, Measured, Progress, Totals, scan_run
from .model import DEFAULT_MIN_COUNT, Bootstrap, ShapeModel, bootstrap as bootstrap_model, model_from_stats
from .paths import Shape, engine_paths, expected_accepted
from .search import DEFAULT_STATE_LIMIT, SearchResult, best_configs, search_shapes

Measure = Callable[[TreeConfig], "Measured | None"]

CONTAINED_ROWS = 3  # best contained shapes added to the comparison besides the listed ones
DISAGREE_Z = 3.0  # |z| beyond which the notes say the target prefers a later draft rank


@dataclass(frozen=True)
class ShapeCheck:
    """One tree shape's predicted block efficiency beside what exact replay measures on the dumps."""

    label: str
    config: TreeConfig
    nodes: int
    predicted_be: float | None  # None: the model refuses to predict (``refused`` says why)
    predicted_se: float
    measured: Measured | None
    refused: str | None = None

    @property
    def predicted_ci(self) -> tuple[float, float] | None:
        if self.predicted_be is None:
            return None
        return self.predicted_be - Z95 * self.predicted_se, self.predicted_be + Z95 * self.predicted_se

    @property
    def measured_be(self) -> float | None:
        """Measured engine block efficiency (accepted + 1) over the decided rounds."""
        return None if self.measured is None else self.measured.mean_accepted + 1.0

    @property
    def measured_ci(self) -> tuple[float, float] | None:
        m = self.measured
        return None if m is None else (self.measured_be - Z95 * m.se, self.measured_be + Z95 * m.se)

    @property
    def measured_bounds(self) -> tuple[float, float] | None:
        """Engine block efficiency over all rounds, undecidable ones at their lower / upper bound."""
        m = self.measured
        if m is None:
            return None
        if m.decided:
            return self.measured_be, self.measured_be
        return m.lower + 1.0, m.upper + 1.0

    @property
    def error(self) -> float | None:
        """predicted − measured, only when every round is decided."""
        if self.measured is None or not self.measured.decided or self.predicted_be is None:
            return None
        return self.predicted_be - self.measured_be

    @property
    def agree(self) -> bool | None:
        """|pred − meas| ≤ 1.96 · sqrt(se_pred² + se_meas²).

        With undecidable rounds the all-rounds mean is only known to lie between its bounds: the
        shape agrees when both bounds pass (then every value between them does), disagrees when
        both fail on the same side, and is not judged otherwise. The decided-rounds mean alone is
        never judged: it may be biased. Not judged either without a prediction.
        """
        m = self.measured
        if m is None or not m.rounds or self.predicted_be is None:
            return None
        tol = Z95 * math.hypot(self.predicted_se, m.se) + 1e-12
        lo, hi = self.measured_bounds
        ok = [abs(self.predicted_be - v) <= tol for v in (lo, hi)]
        if all(ok):
            return True
        if not any(ok) and (self.predicted_be - lo) * (self.predicted_be - hi) > 0:
            return False
        return None

    def to_json(self) -> dict:
        m = self.measured
        ci = self.predicted_ci
        return {
            "label": self.label,
            "config": self.config.to_json(),
            "nodes": self.nodes,
            "predicted_block_efficiency": self.predicted_be,
            "predicted_ci95": None if ci is None else list(ci),
            "refused": self.refused,
            "measured_block_efficiency": self.measured_be,
            "measured_ci95": None if m is None else list(self.measured_ci),
            "measured_rounds": None if m is None else m.rounds,
            "measured_undecidable_rounds": None if m is None else m.undecidable,
            "measured_bounds": None if m is None else list(self.measured_bounds),
            "measured_how": None if m is None else m.how,
            "error": self.error,
            "agree": self.agree,
        }


def predict_with_se(model: ShapeModel, paths: Sequence[RankPath], boots: Bootstrap | None) -> tuple[float, float]:
    """Expected accepted length of a fixed node set and its bootstrap standard error (0 without data)."""
    value = expected_accepted(paths, model)
    if boots is None or len(boots) < 2:
        return value, 0.0
    return value, float(boots.path_values(paths).std(ddof=1))


def depth_refusal(depth: int, depth_cap: int) -> str | None:
    """Why a tree ``depth`` deep gets no prediction, or None: a depth the dumps do not estimate."""
    if depth > depth_cap:
        return f"needs depth {depth}; the dumps estimate acceptance to depth {depth_cap} (--extrapolate to assume more)"
    return None


def refusal(cfg: TreeConfig, model: ShapeModel, depth_cap: int) -> str | None:
    """Why the model will not predict ``cfg``, or None (docs/shape-search.md, "Refusals")."""
    if (why := depth_refusal(cfg.gamma, depth_cap)) is not None:
        return why
    if cfg.max_width > model.cols:
        return f"keeps {cfg.max_width} children; the dumps record {model.cols} draft columns"
    return None


def compare_predictions(
    model: ShapeModel,
    shapes: Sequence[TreeConfig | Shape],
    measure: Measure,
    bootstrap: int = 200,
    boots: Bootstrap | None = None,
    measured: Sequence[Measured | None] | None = None,
    depth_cap: int | None = None,
) -> list[ShapeCheck]:
    """Predicted block efficiency (bootstrap over round groups) vs ``measure`` for each shape.

    The prediction for a config is the model's value of the tree the engine builds for it
    (engine_paths), or a refusal (``refusal``); ``measure`` returns the measured mean accepted
    length, or None when the dumps cannot decide it (the row is still listed, without a
    measurement). ``measured``: measurements already made (then ``measure`` is not called).
    """
    boots = bootstrap_model(model, bootstrap) if boots is None else boots
    cap = model.depths if depth_cap is None else depth_cap
    rows = []
    for k, item in enumerate(shapes):
        cfg = item.config if isinstance(item, Shape) else item
        paths = engine_paths(cfg, model)
        meas = measure(cfg) if measured is None else measured[k]
        why = refusal(cfg, model, max(cap, 1))
        if why is not None:
            rows.append(ShapeCheck(f"#{k + 1}", cfg, len(paths), None, 0.0, meas, why))
            continue
        value, se = predict_with_se(model, paths, boots)
        rows.append(ShapeCheck(f"#{k + 1}", cfg, len(paths), value + 1.0, se, meas))
    return rows


# -- measurements a replay can make exactly ---------------------------------------------------


def best_contained(
    model: ShapeModel, recorded: TreeConfig, budget: int, max_depth: int, count: int = 3
) -> list[TreeConfig]:
    """The ``count`` configs contained in ``recorded`` with the highest modelled block efficiency
    within the node budget and depth cap: the best shapes the dump itself checks exactly."""
    return [cfg for _, cfg in best_configs(model, budget, max_depth, count, within=recorded)]


def recorded_trees_check(
    model: ShapeModel, dump: DumpInput, boots: Bootstrap | None, label: str, depth_cap: int
) -> ShapeCheck:
    """Model vs replay on the trees actually recorded (each round's own selection): checks the
    independence model and its estimate without the ordering assumption. The share of rounds
    holding a path already counts the early stops, so a path is valued by its acceptance alone.
    Refused, as a config is, when a recorded tree is deeper than ``depth_cap``."""
    st = dump.stats
    freq = st.trees.counts.sum(axis=0) / max(st.rounds, 1)  # [P] share of rounds holding each path
    mean, mse = st.mean_se_accepted
    nodes = int(round(st.nodes_sum / max(st.rounds, 1)))
    meas = Measured(mean, mse, st.rounds, "replay, recorded per-round trees")
    deepest = max((len(p) for f, p in zip(freq, st.trees.paths) if f > 0), default=0)
    if (why := depth_refusal(deepest, depth_cap)) is not None:
        return ShapeCheck(label, st.first_shape or dump.tree, nodes, None, 0.0, meas, why)
    pred = float(sum(f * model.acceptance_probability(p) for f, p in zip(freq, st.trees.paths)))
    se = 0.0
    if boots is not None and len(boots) > 1:
        draws = sum(f * boots.acceptance_values([p]) for f, p in zip(freq, st.trees.paths))
        se = float(np.std(draws, ddof=1))
    return ShapeCheck(label, st.first_shape or dump.tree, nodes, pred + 1.0, se, meas)


# -- the whole recommendation -----------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Recommendation:
    directories: tuple[str, ...]
    model: ShapeModel
    search: SearchResult
    comparisons: tuple[ShapeCheck, ...]
    recorded: tuple[TreeConfig, ...]
    rounds: int
    skipped: int
    cost: CostModel | None
    notes: tuple[str, ...] = field(default=())
    skipped_items: tuple = field(default=())  # replay.io.skipped.Skipped of every dump
    seconds: dict = field(default_factory=dict)  # wall time per phase: statistics, search, exact replay, bootstrap
    max_depth: int | None = None  # the depth asked for (the search may stop shallower: refused depths)
    extrapolate: bool = False  # --extrapolate: depths without data reuse the deepest estimated one
    warnings: tuple[str, ...] = field(default=())  # lines for stderr about how the dumps were read
    skipped_by_dump: tuple = field(default=())  # per directory (in their order), its Skipped: listed under its label

    def depth_text(self) -> str:
        """'max depth D', and where the search stopped when deeper depths were refused."""
        asked, searched = self.max_depth or self.search.max_depth, self.search.max_depth
        if searched >= asked:
            return f"max depth {asked}"
        return f"max depth {asked} (searched to depth {searched}: deeper depths have too few visits to estimate)"


def check_budget(budget: int) -> None:
    if budget < 1:
        raise SpecReplayError(f"--budget must be at least 1, got {budget}")


def check_max_depth(depth: int | None) -> None:
    if depth is not None and depth < 1:
        raise SpecReplayError(f"--max-depth must be at least 1, got {depth}")


def recommend_runs(
    paths: Sequence[str],
    opts: ReplayOptions = ReplayOptions(),
    budget: int = 12,
    max_depth: int | None = None,
    cost: CostModel | None = None,
    progress: Callable[[str], Progress | None] = lambda stage: None,
    loaded: Sequence[LabelledRun] = (),
    known: Sequence[Mapping[TreeConfig, Totals]] = (),
    **options,
) -> Recommendation:
    """recommend on dump directories or packed runs, read and replayed in batches (the CLI's path).

    progress(stage) → a ``progress(done, total)`` callback for that stage, or None; ``loaded``: per
    path, the run already loaded, whose kept batches are scanned instead of reading it again
    (dumps.scan_run); ``known``: per path, the sums of configs walked on that loaded run already
    (scan_run's); ``options``: recommend_dumps' (top, min_count, bootstrap, seed, extrapolate, ...).
    """
    check_budget(budget)  # before the statistics pass, which may take long
    start = time.perf_counter()
    given = list(loaded) or [None] * len(paths)
    walked = list(known) or [None] * len(paths)
    dumps = [
        scan_run(p, opts, progress(f"statistics {k + 1}/{len(paths)}"), loaded=given[k], known=walked[k])
        for k, p in enumerate(paths)
    ]
    rec = recommend_dumps(dumps, budget, max_depth, cost, progress=progress, **options)
    return replace(rec, seconds={"statistics": time.perf_counter() - start - sum(rec.seconds.values()), **rec.seconds})


def _shapes_to_check(model, recorded: TreeConfig, result, budget: int, cap: int) -> dict[tuple, tuple[TreeConfig, str]]:
    """The shapes a dump replays exactly, by key → (config, row label): the search's best by block
    efficiency and by speedup, the best contained in ``recorded`` besides those, and the recorded one last."""
    labels: dict[tuple, tuple[TreeConfig, str]] = {_key(recorded): (recorded, "recorded")}
    for prefix, configs in (
        ("BE", [x.config for x in result.by_block_efficiency]),
        ("speed", [x.config for x in result.by_speedup]),
    ):
        for k, cfg in enumerate(configs):
            labels.setdefault(_key(cfg), (cfg, f"{prefix}#{k + 1}"))
    # the best shapes this dump can check exactly, besides those already listed
    extra = [
        c for c in best_contained(model, recorded, budget, cap, len(labels) + CONTAINED_ROWS) if _key(c) not in labels
    ]
    labels.update({_key(c): (c, f"contained#{k + 1}") for k, c in enumerate(extra[:CONTAINED_ROWS])})
    labels[_key(recorded)] = labels.pop(_key(recorded))  # the recorded row last, as a reference
    return labels


def _usable_dumps(dumps: Sequence[DumpInput]) -> list[DumpInput]:
    """The dumps with a replayed round; none at all is an error that lists what was skipped."""
    usable = [d for d in dumps if d.stats.rounds]
    if not usable:
        skipped = tuple(s for d in dumps for s in d.skipped)
        where = ", ".join(d.directory for d in dumps) or "no dump given"
        raise NoRoundsError(
            f"no round could be replayed, nothing to estimate from: {where}{why_no_rounds(skipped)}",
            skipped,
            tuple(w for d in dumps for w in d.warnings),
        )
    return usable


def _refused_depth_note(merged, cap: int, min_count: int) -> str:
    """Why the search stops at depth ``cap``: too few visits one depth deeper."""
    # depths as stats numbers them (replay.core.vocab.DEPTH_RULE): model row cap accepts depth cap + 1.
    # Depth 1 is estimated from whatever visits there are (every round visits the root, model.estimate_cells);
    # deeper ones need --min-count: say both counts, or depth 1 with fewer visits looks inconsistent.
    visits = merged.n.sum(axis=(0, 2))
    seen = int(visits[cap]) if cap < visits.shape[0] else 0
    first = (
        f"; depth 1 is estimated from any number of visits ({int(visits[0])} here: every round visits the root)"
        if int(visits[0]) < min_count
        else ""
    )
    return (
        f"refused depths beyond {cap}: depth {cap + 1} has {seen} visit(s), fewer than --min-count {min_count}, so its "
        f"acceptance is unknown; the search stops at depth {cap} (--extrapolate reuses depth {cap}'s estimate){first}"
    )


def recommend_dumps(
    dumps: Sequence[DumpInput],
    budget: int,
    max_depth: int | None = None,
    cost: CostModel | None = None,
    top: int = 5,
    min_count: int = DEFAULT_MIN_COUNT,
    bootstrap: int = 200,
    seed: int = 0,
    extrapolate: bool = False,
    progress: Callable[[str], Progress | None] = lambda stage: None,
    state_limit: int = DEFAULT_STATE_LIMIT,
) -> Recommendation:
    """Estimate, search and compare. The search's depth is capped at the deepest depth the dumps
    estimate unless ``extrapolate``; ``bootstrap`` resamples give the prediction intervals."""
    check_budget(budget)
    usable = _usable_dumps(dumps)
    merged = merge_stats([d.stats.stats for d in usable])
    if merged.num_visits == 0:
        raise SpecReplayError("no reached node has both a draft row and a target top-1: cannot estimate acceptance")
    depth = merged.max_tree_depth if max_depth is None else max_depth
    check_max_depth(depth)
    clock = {"search": 0.0, "exact replay": 0.0, "bootstrap": 0.0}
    tick = time.perf_counter()

    def lap(phase: str) -> None:
        nonlocal tick
        now = time.perf_counter()
        clock[phase] += now - tick
        tick = now

    model = model_from_stats(merged, min_count, max(depth, merged.depths))
    notes: list[str] = []
    cap = depth if extrapolate else min(depth, model.supported_depth)
    if cap < depth:
        notes.append(_refused_depth_note(merged, cap, min_count))
    result = search_shapes(model, budget, cap, cost, top, state_limit)
    lap("search")
    boots = bootstrap_model(model, bootstrap, seed)
    lap("bootstrap")
    comparisons: list[ShapeCheck] = []
    for dump in usable:
        labels = _shapes_to_check(model, dump.tree, result, budget, cap)
        configs = [c for c, _ in labels.values()]
        lap("search")
        measured = dump.measure_many(configs, progress("exact replay"))
        lap("exact replay")
        known = 10**9 if extrapolate else model.supported_depth  # refuse only depths without data
        rows = compare_predictions(model, configs, lambda c: None, boots=boots, measured=measured, depth_cap=known)
        comparisons += [replace(row, label=label) for row, (_, label) in zip(rows, labels.values())]
        comparisons.append(recorded_trees_check(model, dump, boots, "recorded trees", known))
        lap("bootstrap")
    if extrapolate and (depth > model.supported_depth):
        notes.append(
            f"depths beyond {model.supported_depth} are extrapolated from the deepest estimated depth ({model.supported_depth})"
        )
    notes += model_notes(model)
    if not result.all_exact:
        notes.append(
            f"the search stopped after {result.states} states: shapes are the best found, each with the relaxation bound"
        )
    skipped = tuple(s for d in dumps for s in d.skipped)
    return Recommendation(
        tuple(d.directory for d in dumps),
        model,
        result,
        tuple(comparisons),
        tuple(d.tree for d in usable),
        merged.num_rounds,
        len(skipped),
        cost,
        tuple(notes),
        skipped,
        clock,
        depth,
        extrapolate,
        tuple(w for d in dumps for w in d.warnings),
        tuple(d.skipped for d in dumps),
    )


def model_notes(model: ShapeModel) -> list[str]:
    """What the user should know about the estimate: pooled rows, unknown draft order, and depths
    where the target prefers a later draft rank (the draft's order disagrees with the target's)."""
    out = []
    pooled = int(model.pooled[~model.extrapolated].sum())
    if pooled:
        out.append(
            f"{pooled} (depth, parent rank) rows have fewer than {model.min_count} visits and use their depth's row pooled "
            "over parent ranks (assumes acceptance there does not depend on the parent's rank); shapes using them are marked [pooled]"
        )
    if model.draft_logp is None:
        out.append(
            "the dumps hold no draft scores: the engine's selection is assumed to rank nodes as the acceptance model does"
        )
    table = depth_table(model)
    if table is not None:
        n, k = table
        for d in range(min(n.shape[0], model.depths)):
            if n[d] < model.min_count:
                continue
            p = k[d] / n[d]
            for r in range(p.shape[0] - 1):
                var = (p[r] + p[r + 1] - (p[r] - p[r + 1]) ** 2) / n[d]
                z = (p[r + 1] - p[r]) / math.sqrt(var) if var > 0 else 0.0
                if z > DISAGREE_Z:
                    out.append(
                        f"depth {d + 1}: the target's top-1 is the draft's rank-{r + 1} candidate more often than its rank-{r} "
                        f"({p[r + 1]:.3f} vs {p[r]:.3f}, z = {z:.1f}): the draft ranks its tokens unlike the target; "
                        "the search ranks nodes the engine's way (draft order) and values them by acceptance"
                    )
    return out


def depth_table(model: ShapeModel) -> tuple[np.ndarray, np.ndarray] | None:
    """(visits [D] float64, hits [D, C] float64) per depth pooled over parent rank, None without data."""
    src = model.source
    if src is None:
        return None
    return src.n.sum(axis=(0, 2)).astype(np.float64), src.k.sum(axis=(0, 2)).astype(np.float64)


def _key(cfg: TreeConfig) -> tuple:
    return cfg.top_k_spec, cfg.top_head
