"""Rounds whose dump lost a scores or parents companion: the rank-major fallback would guess their tree.

An engine that writes scores (or parents) writes them for every draft step. A round where some
steps have them and a step that needs them does not lost a companion file (or an array), and the
fallback's guess would silently replace the engine's tree: such a round is rejected, naming the step.
A dump without any scores or parents is replayed by the fallback, with its warning (selection.py).
"""

from __future__ import annotations

import numpy as np

from replay.core.selection import fallback_guesses
from replay.core.vocab import PAD_TOKEN
from replay.io.roundbatch import MatrixStack, RoundBatch

from .checks import Checks
from .codes import ERR_LOST_COMPANION, LOST_PARENTS, LOST_SCORES, SEL_FALLBACK
from .shapes import TreeShape


def check_lost_companions(
    checks: Checks, batch: RoundBatch, shape: TreeShape, selection: np.ndarray, lo: int, hi: int
) -> None:
    """Rounds [lo, hi) that lost a companion (selection: [S, C] int8 SEL_* codes), checked after every
    draft step's own checks: parents on some draft step and none on a step >= 1 whose level has two
    or more nodes (recorded at that step); else scores on some draft step and a fallback guess
    (recorded at the first step without scores, whose absence leaves the later levels without path
    probabilities). Row: the step whose expanded nodes would not be the dump's."""
    sizes = np.asarray(shape.level_sizes[: shape.num_steps], dtype=np.int64)[:, None]
    if any(st.parents is not None for st in batch.steps):
        _check_lost_parents(checks, batch, sizes, lo, hi)
    guessing = (selection == SEL_FALLBACK) & fallback_guesses(sizes)  # [S, C]
    if not guessing.any():
        return  # the common case: no guess
    scored = np.stack([holds_scores(st, lo, hi) for st in batch.steps])  # [steps, C]
    guess_step = np.argmax(guessing, axis=0)
    lost = guessing.any(axis=0) & scored.any(axis=0)  # else: an unscored dump's guess, warned about
    checks.add(lost, ERR_LOST_COMPANION, np.argmax(~scored, axis=0), guess_step, LOST_SCORES)


def _check_lost_parents(checks: Checks, batch: RoundBatch, sizes: np.ndarray, lo: int, hi: int) -> None:
    """sizes: [S, 1] int64 level sizes of draft steps 0..S-1."""
    parented = np.stack([holds_parents(st, lo, hi) for st in batch.steps])  # [steps, C]
    chosen = (np.arange(sizes.shape[0]) >= 1)[:, None] & fallback_guesses(sizes)  # [S, 1] a rule orders them
    without = chosen & ~parented[: sizes.shape[0]]  # [S, C]
    lost = parented.any(axis=0) & without.any(axis=0)
    step = np.argmax(without, axis=0)
    checks.add(lost, ERR_LOST_COMPANION, step, step, LOST_PARENTS)


def holds_scores(st: MatrixStack, lo: int, hi: int) -> np.ndarray:
    """[C] bool: rounds [lo, hi) whose own draft step holds scores (a stack pads with NaN)."""
    if st.logp is None:
        return np.zeros(hi - lo, dtype=bool)
    out: np.ndarray = ~np.isnan(st.logp[:, :, lo:hi]).all(axis=(0, 1))
    return out


def holds_parents(st: MatrixStack, lo: int, hi: int) -> np.ndarray:
    """[C] bool: rounds [lo, hi) whose own draft step holds parents (a stack pads with PAD_TOKEN)."""
    if st.parents is None:
        return np.zeros(hi - lo, dtype=bool)
    out: np.ndarray = (st.parents[:, lo:hi] != PAD_TOKEN).any(axis=0)
    return out
