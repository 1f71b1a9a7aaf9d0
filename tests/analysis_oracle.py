"""Record dumps of any tree config from a *path oracle*, independently of replay.testing.subtree_walk.

An oracle gives the draft's candidate row and the target's row as deterministic functions of a
node's token path (root token first), which is what real models do. Recording the same rounds
with two configs from one oracle gives two genuine dumps; replay.testing.subtree_walk must reproduce the
second from the first wherever it claims to decide. The recorder rebuilds trees its own way
(token paths, its own sort), never through replay.testing.rebuild or replay.testing.subtree_walk.
"""

from __future__ import annotations

import functools
import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.core.config import TreeConfig
from replay.io.dumpwrite import StepRecord, write_manifest, write_round
from replay.io.rounds import Round
from replay.testing.selection_ref import select_ref
from replay.testing.synth import SynthRound

VOCAB = 5000
Path_ = tuple  # token path from the root, root token included

DraftFn = Callable[[tuple], tuple[np.ndarray, np.ndarray]]  # path -> ids [cols] int64, logp [cols] float32
TargetFn = Callable[[tuple], np.ndarray]  # path -> target row [tcols] int64


def _rng(seed: int, tag: int, path: tuple) -> np.random.Generator:
    h = zlib.crc32(np.asarray(path, dtype=np.int64).tobytes())
    return np.random.default_rng([seed, tag, h, len(path)])


def random_oracle(
    seed: int, cols: int, hit: float = 0.6, tcols: int = 3, flat: float = 0.7, grid: int | None = None
) -> tuple[DraftFn, TargetFn]:
    """Draft rows and target rows drawn from a generator seeded by the path.

    The target's top-1 is the draft's rank-r candidate with probability hit * 0.5**r (else a
    token outside the row), so paths of several accepted tokens are common. ``flat`` is the
    Dirichlet concentration of draft probabilities: higher gives flatter rows, so nodes of
    different branches compete closely for expansion. ``grid``: draft probabilities floored to
    multiples of 1/grid (as fp16 dumps round them), so that siblings and cousins tie in path
    probability and the tie rule decides which are expanded.
    """

    @functools.cache
    def draft(path: tuple) -> tuple[np.ndarray, np.ndarray]:
        rng = _rng(seed, 1, path)
        ids = rng.choice(VOCAB, size=cols, replace=False).astype(np.int64)
        probs = np.sort(rng.dirichlet(np.full(cols + 1, flat)))[::-1][:cols]
        if grid is not None:
            probs = np.floor(probs * grid) / grid
        return ids, np.log(np.maximum(probs, 1e-9)).astype(np.float32)

    @functools.cache
    def target(path: tuple) -> np.ndarray:
        rng = _rng(seed, 2, path)
        cand, _ = draft(path)
        row = rng.choice(VOCAB, size=tcols + cols, replace=False)
        row = row[~np.isin(row, cand)][:tcols].astype(np.int64)
        u = rng.random()
        p = hit * 0.5 ** np.arange(cols)
        r = int(np.searchsorted(np.cumsum(p), u, side="right"))
        if r < cols:
            row[0] = cand[r]
        return row

    return draft, target


@dataclass
class Recorded:
    steps: list[StepRecord]
    validate_all: np.ndarray  # [1 + nodes, tcols]
    validate_parents: np.ndarray  # [num_expanded, tcols]


def record_round(
    cfg: TreeConfig, root: int, steps: int, draft: DraftFn, target: TargetFn, rule: str, threshold: float = 0.0
) -> Recorded:
    """Build one round's tree with ``cfg`` the way an engine does, asking the oracle per node.

    rule: "path" (path probability, ties by tree order) or "fallback" (rank, then parent slot).
    threshold: stop drafting after a step whose rows all have a top-1 probability below it.
    """
    paths: list[tuple] = [(root,)]
    parent, rank, logp = [-1], [-1], [0.0]
    level = [0]
    slot_of = {0: 0}
    records, expanded = [], []
    for i in range(steps):
        if i == 0:
            chosen = [0]
        elif rule == "path":
            chosen = [level[j] for j in select_ref([logp[u] for u in level], cfg.top_head[i])]  # level: tree order
        elif rule == "fallback":
            chosen = sorted(level, key=lambda u: (rank[u], slot_of[parent[u]], u))[: cfg.top_head[i]]  # no ties
        else:
            raise ValueError(rule)
        ids_rows, lp_rows, new_level = [], [], []
        for j, u in enumerate(chosen):
            ids, lp = draft(paths[u])
            ids_rows.append(ids)
            lp_rows.append(lp)
            for r in range(cfg.top_k_spec[i][j]):
                paths.append(paths[u] + (int(ids[r]),))
                parent.append(u)
                rank.append(r)
                logp.append(logp[u] + float(lp[r]))
                new_level.append(len(paths) - 1)
        expanded.extend(chosen)
        records.append(StepRecord(np.stack(ids_rows), np.stack(lp_rows), np.asarray(chosen, dtype=np.int64)))
        slot_of = {u: j for j, u in enumerate(chosen)}
        level = new_level
        if threshold > 0 and max(math.exp(float(lp[0])) for lp in lp_rows) < threshold:
            break
    rows = np.stack([target(p) for p in paths])
    return Recorded(records, rows, rows[expanded])


def narrow_rows(rec: Recorded, cfg: TreeConfig) -> Recorded:
    """``rec`` (recorded with ``cfg``) with each step's draft rows cut to the step's widest kept
    width: what an engine that writes the candidates it keeps, and no more, records."""
    steps = [
        StepRecord(s.ids[:, : max(w)], s.scores[:, : max(w)], s.parents) for s, w in zip(rec.steps, cfg.top_k_spec)
    ]
    return Recorded(steps, rec.validate_all, rec.validate_parents)


def as_round(rec: Recorded, key, root: int, layout: str = "all", scores: bool = True, parents: bool = False) -> Round:
    """The recorded round in memory, as replay reads it from a dump directory."""
    return Round.from_lists(
        [s.ids for s in rec.steps],
        rec.validate_all if layout == "all" else rec.validate_parents,
        key=key,
        step_logp=[s.scores for s in rec.steps] if scores else None,
        step_parents=[s.parents for s in rec.steps] if parents else None,
        root_token=root,
        layout=layout,
    )


def write_oracle_run(
    out_dir: str | Path,
    cfg: TreeConfig,
    roots: list[int],
    steps: list[int],
    draft: DraftFn,
    target: TargetFn,
    rule: str = "path",
    layout: str = "all",
    scores: bool = True,
    parents: bool = False,
) -> None:
    """Write one dump directory (npz + manifest); round k has root ``roots[k]`` and ``steps[k]`` steps."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    keys = []
    for k, (root, n) in enumerate(zip(roots, steps)):
        rec = record_round(cfg, root, n, draft, target, rule)
        key = (100 + 8 * k, 116 + 8 * k)
        recs = [StepRecord(s.ids, s.scores if scores else None, s.parents if parents else None) for s in rec.steps]
        val = rec.validate_all if layout == "all" else rec.validate_parents
        write_round(out_dir, key, recs, StepRecord(val))
        keys.append({"key": list(key), "root_token": int(root)})
    manifest = {"config": cfg.to_json(), "layout": layout, "step0_offset": 1, "rounds": keys}
    if scores:
        manifest["score_kind"] = "logprob"
    write_manifest(out_dir, manifest)


def synth_lookup_oracle(
    rounds: list[SynthRound], cfg: TreeConfig, fill: tuple[DraftFn, TargetFn]
) -> tuple[DraftFn, TargetFn]:
    """An oracle answering from synthetic rounds (replay.testing.synth, recorded with parents) by token path.

    Paths the recording never saw are answered by ``fill``: replay.testing.subtree_walk claims that a decided
    round does not depend on them, so any fill must give the same decided outcome.
    """
    draft_rows: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
    target_rows: dict[tuple, np.ndarray] = {}
    for rnd in rounds:
        paths = [(rnd.root_token,)]
        logp = [0.0]
        level = [0]
        for i, step in enumerate(rnd.steps):
            if step.parents is not None:
                chosen = step.parents.tolist()
            else:  # replay.testing.synth's own rule: path probability (ties: rank_ties)
                chosen = [0] if i == 0 else [level[j] for j in select_ref([logp[u] for u in level], cfg.top_head[i])]
            new, new_lp = [], []
            for j, u in enumerate(chosen):
                draft_rows[paths[u]] = (step.ids[j], step.scores[j])
                for r in range(cfg.top_k_spec[i][j]):
                    new.append(paths[u] + (int(step.ids[j, r]),))
                    new_lp.append(logp[u] + float(step.scores[j, r]))
            level = list(range(len(paths), len(paths) + len(new)))
            paths.extend(new)
            logp.extend(new_lp)
        for u, p in enumerate(paths):
            target_rows[p] = rnd.validate.ids[u]
    fill_draft, fill_target = fill

    def draft(path: tuple):
        return draft_rows[path] if path in draft_rows else fill_draft(path)

    def target(path: tuple):
        return target_rows[path] if path in target_rows else fill_target(path)

    return draft, target
