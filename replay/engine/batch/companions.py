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
    """Rounds [lo, hi) whose fallback guessed while a draft step of the round has scores or parents
    (selection: [S, C] int8 SEL_* codes), checked after every draft step's own checks. Recorded at
    the draft step whose file lacks them (with parents elsewhere: the step that guessed; else the
    first step without scores, whose absence leaves the later levels without path probabilities),
    row: the step that guessed."""
    sizes = np.asarray(shape.level_sizes[: shape.num_steps], dtype=np.int64)[:, None]
    guessing = (selection == SEL_FALLBACK) & fallback_guesses(sizes)  # [S, C]
    if not guessing.any():
        return  # the common case: no guess
    scored = np.stack([holds_scores(st, lo, hi) for st in batch.steps])  # [steps, C]
    with_parents = np.stack([holds_parents(st, lo, hi) for st in batch.steps]).any(axis=0)
    lost = guessing.any(axis=0) & (with_parents | scored.any(axis=0))  # else: an unscored dump's guess
    guess_step = np.argmax(guessing, axis=0)
    step = np.where(with_parents, guess_step, np.argmax(~scored, axis=0))
    checks.add(lost, ERR_LOST_COMPANION, step, guess_step, np.where(with_parents, LOST_PARENTS, LOST_SCORES))


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
