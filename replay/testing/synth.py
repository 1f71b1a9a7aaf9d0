"""Synthetic dumps from a known acceptance model (sample data, tests, benchmarks).

Each round: the draft proposes, at every expanded node, a row of distinct random tokens with
descending probabilities; expanded nodes are chosen by path probability (the engine's static
rule, replay.core.selection's select_top). The target's top-1 at a node of depth d equals the
draft's rank-r candidate there with probability ``hit[d, r]``, and is a token outside the row
otherwise. The tree is built here, independently of replay.testing.rebuild, so that replaying
its output checks the replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from replay.core.config import TreeConfig
from replay.core.selection import select_top
from replay.io.dumpwrite import StepRecord, write_manifest, write_round
from replay.util.atomic import write_bytes_atomic

DEFAULT_VOCAB = 32000
SYNTH_KEY_STRIDE = 8  # between rounds' first keys: a round commits at most gamma + 1 tokens, keys never collide


def default_hit_probs(
    depth: int, cols: int, first: float = 0.55, decay: float = 0.45, depth_decay: float = 0.9
) -> np.ndarray:
    """[depth, cols] float64: P(target's top-1 = draft rank r | node at depth d)."""
    d = np.arange(depth)[:, None]
    r = np.arange(cols)[None, :]
    return first * (depth_decay**d) * (decay**r)


@dataclass(frozen=True, eq=False)
class SynthRound:
    key: tuple[int, int]
    root_token: int
    steps: tuple[StepRecord, ...]  # draft_step ids [heads, cols] int64, scores = log-probs, parents
    validate: StepRecord  # all layout: [1 + num_nodes, target_cols]


def _draft_row(
    rng: np.random.Generator, vocab: int, cols: int, fixed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``fixed``: [cols] float64 per-rank draft probabilities; None draws them (Dirichlet)."""
    ids = rng.choice(vocab, size=cols, replace=False).astype(np.int64)
    if fixed is not None:
        return ids, np.log(np.maximum(fixed[:cols], 1e-12))
    probs = np.sort(rng.dirichlet(np.full(cols + 1, 0.6)))[::-1][:cols]  # mass left for the tail
    return ids, np.log(np.maximum(probs, 1e-12))


def check_draft_probs(draft_probs: np.ndarray | None, cols: int) -> np.ndarray | None:
    """[cols] or [depth, cols] float64 → [depth, cols] (one row per node depth), or None.

    Rows must be positive and non-increasing (a draft row is sorted by probability).
    """
    if draft_probs is None:
        return None
    arr = np.asarray(draft_probs, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < cols:
        raise ValueError(f"draft_probs: expected [cols] or [depth, cols] with cols >= {cols}, got shape {arr.shape}")
    if np.any(arr[:, :cols] <= 0) or np.any(np.diff(arr[:, :cols], axis=1) > 0):
        raise ValueError("draft_probs: every row must be positive and non-increasing")
    return arr


def _target_row(rng, vocab: int, cand: np.ndarray | None, hit: np.ndarray, cols: int) -> np.ndarray:
    """Target's top-`cols` ids at a node; ``cand`` the draft's row there (None for a leaf)."""
    row = rng.choice(vocab, size=cols + (0 if cand is None else cand.shape[0]), replace=False)
    if cand is not None:
        row = row[~np.isin(row, cand)][:cols]
        u = rng.random()
        cum = np.cumsum(hit[: cand.shape[0]])
        r = int(np.searchsorted(cum, u, side="right"))
        if r < cand.shape[0]:
            row[0] = cand[r]
    return row[:cols].astype(np.int64)


def synth_round(
    rng: np.random.Generator,
    cfg: TreeConfig,
    key: tuple[int, int],
    hit: np.ndarray,
    vocab: int = DEFAULT_VOCAB,
    cols: int | None = None,
    target_cols: int = 4,
    steps: int | None = None,
    draft_probs: np.ndarray | None = None,
) -> SynthRound:
    """One round of ``steps`` (default gamma) draft steps; ``cols`` recorded draft columns.

    draft_probs: [depth, cols] float64 fixed per-(node depth, rank) draft probabilities (rows
    beyond the last reuse it), or None for random Dirichlet rows. Fixed rows proportional to
    ``hit`` make the engine's path-probability selection rank nodes as the acceptance model does.
    """
    cols = cols or cfg.max_width + 2
    steps = cfg.gamma if steps is None else steps
    root = int(rng.integers(vocab))
    # nodes: (parent, depth, rank, token, path logprob)
    parent, depth, token, logp = [-1], [0], [root], [0.0]
    cand: dict[int, np.ndarray] = {}
    level = [0]
    records = []
    for i in range(steps):
        if i == 0:
            chosen = [0]
        else:
            chosen = [level[j] for j in select_top([logp[u] for u in level], cfg.top_head[i])]
        rows_ids, rows_lp = [], []
        new_level = []
        for j, u in enumerate(chosen):
            fixed = None if draft_probs is None else draft_probs[min(i, draft_probs.shape[0] - 1)]
            ids, lp = _draft_row(rng, vocab, cols, fixed)
            cand[u] = ids
            rows_ids.append(ids)
            rows_lp.append(lp)
            for r in range(cfg.top_k_spec[i][j]):
                parent.append(u)
                depth.append(i + 1)
                token.append(int(ids[r]))
                logp.append(logp[u] + float(lp[r]))
                new_level.append(len(token) - 1)
        records.append(
            StepRecord(np.stack(rows_ids), np.stack(rows_lp).astype(np.float32), np.asarray(chosen, dtype=np.int64))
        )
        level = new_level
    val = np.stack(
        [
            _target_row(rng, vocab, cand.get(u), hit[min(depth[u], hit.shape[0] - 1)], target_cols)
            for u in range(len(token))
        ]
    )
    val_lp = np.log(np.sort(rng.dirichlet(np.ones(target_cols + 1)))[::-1][:target_cols])
    return SynthRound(key, root, tuple(records), StepRecord(val, np.tile(val_lp, (val.shape[0], 1)).astype(np.float32)))


def write_synthetic_run(
    out_dir: str | Path,
    cfg: TreeConfig,
    rounds: int,
    seed: int = 0,
    hit: np.ndarray | None = None,
    with_parents: bool = False,
    early_stop_rate: float = 0.0,
    draft_probs: np.ndarray | None = None,
    cols: int | None = None,
) -> list[SynthRound]:
    """Write ``rounds`` rounds (npz, all layout, log-prob scores) plus manifest.json.

    draft_probs: [cols] or [depth, cols] fixed draft probabilities (see synth_round); None keeps
    the random Dirichlet rows (and the exact byte stream of earlier versions).
    cols: recorded draft columns (default max width + 2).
    """
    rng = np.random.default_rng(seed)
    cols = cfg.max_width + 2 if cols is None else cols
    hit = default_hit_probs(cfg.gamma + 1, cols) if hit is None else hit
    fixed = check_draft_probs(draft_probs, cols)
    out: list[SynthRound] = []
    pos = 100
    for _ in range(rounds):
        steps = cfg.gamma
        if early_stop_rate and rng.random() < early_stop_rate:
            steps = int(rng.integers(1, cfg.gamma)) if cfg.gamma > 1 else 1
        key = (pos, pos + 16)
        rnd = synth_round(rng, cfg, key, hit, cols=cols, steps=steps, draft_probs=fixed)
        if not with_parents:
            rnd = SynthRound(
                rnd.key, rnd.root_token, tuple(StepRecord(s.ids, s.scores) for s in rnd.steps), rnd.validate
            )
        write_round(out_dir, key, rnd.steps, rnd.validate)
        out.append(rnd)
        pos += SYNTH_KEY_STRIDE
    extra = {} if fixed is None else {"draft_probs": fixed.tolist()}
    write_manifest(
        out_dir,
        {
            **extra,
            "config": cfg.to_json(),
            "layout": "all",
            "score_kind": "logprob",
            "step0_offset": 1,
            "source": f"synthetic: replay.testing.synth.write_synthetic_run(seed={seed}, rounds={rounds})",
            "hit_probs": hit.tolist(),
            "rounds": [{"key": list(r.key), "root_token": r.root_token} for r in out],
        },
    )
    return out


def add_node_logprobs(
    directory: str | Path, temperatures: tuple[float, ...] = (0.7, 1.0), seed: int = 0, skip_every: int = 0
) -> list[str]:
    """Give the validate .npz files of a dump in the ``all`` layout (write_synthetic_run's) a
    ``node_logprobs`` array (docs/dump-format.md) and list ``temperatures`` in manifest.json.

    The values are made up but sound: per node, its children's probabilities are a Dirichlet
    share of 1 with some mass left over, scaled by 1/(j+1) in column j (so the columns differ).
    ``skip_every``: every k-th round keeps no array (a dump of mixed rounds). Returns the names
    ("A_B") of the rounds given one.
    """
    import json

    from replay.testing.replayer import replay_directory

    directory = Path(directory)
    rng = np.random.default_rng(seed)
    given = []
    for k, res in enumerate(replay_directory(directory).results):
        if skip_every and k % skip_every == skip_every - 1:
            continue
        path = directory / f"validate_{res.name}.npz"
        with np.load(path) as z:
            arrays = dict(z)
        parents = res.tree.parents
        own = np.zeros((arrays["ids"].shape[0], len(temperatures)))
        for p in range(parents.shape[0]):
            kids = np.flatnonzero(parents == p)
            kids = kids[kids > 0]
            share = rng.dirichlet(np.ones(kids.shape[0] + 1))[: kids.shape[0]]
            for j in range(len(temperatures)):
                own[kids, j] = np.log(share / (j + 1))
        arrays["node_logprobs"] = own
        np.savez(path, **arrays)
        given.append(res.name)
    manifest = directory / "manifest.json"
    body = json.loads(manifest.read_text()) if manifest.exists() else {}
    body["node_logprob_temperatures"] = [float(t) for t in temperatures]
    write_manifest(directory, body)
    return given


def write_text_matrix(path: str | Path, ids: np.ndarray) -> None:
    """[rows, cols] int matrix as whitespace-separated text (the article's plain form)."""
    ids = np.asarray(ids)
    if ids.ndim != 2:
        raise ValueError(f"expected [rows, cols], got shape {ids.shape}")
    lines = [" ".join(str(int(v)) for v in row) for row in ids]
    write_bytes_atomic(path, ("\n".join(lines) + "\n").encode())
