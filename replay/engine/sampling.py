"""Sampling mode's words and shapes, one place for every command: a round's ``sampling`` object
(RoundSampling, SAMPLING_KEYS), bounds on P(L = d), why a round has no sampling replay at T
(NO_SCORES, row_problem_words, node_columns_words, sampling_skip) and the vocabulary size used.

The rule (and its bounds) lives in replay.core.sampling; the batch engine applies it to rounds
(replay.engine.batch.sampling).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from replay.core.point_value import point_value
from replay.core.sampling_problems import PROBLEM_SUM, PROBLEM_ZERO, VocabSize, VocabTooSmall, problem_words
from replay.core.sampling_rows import row_problems
from replay.core.temperature import format_temperature
from replay.core.vocab import PAD_TOKEN
from replay.io.skipped import Skipped, round_entry
from replay.util.errors import SpecReplayError
from replay.util.words import row_words

NO_SCORES = (
    "its validate rows have no scores (sampling mode needs the target's scores, log-probs or probabilities: a `scores` array in the "
    "validate .npz/.pt, or a validate_A_B.scores file beside it; docs/dump-format.md)"
)


@dataclass(frozen=True)
class RoundSampling:
    """One round at temperature T; lo == hi where the dump determines the value."""

    temperature: float
    expected_lo: float  # E[accepted length]
    expected_hi: float
    length_ge_lo: tuple[float, ...]  # P(accepted length >= d), d = 1..depth of the tree
    length_ge_hi: tuple[float, ...]
    exact: bool
    variance: float | None  # Var[accepted length] when exact
    needs_vocab: bool
    from_node_logprobs: bool = False  # the dump's node_logprobs at T decided it (exact)

    def to_json(self) -> dict:
        values = (
            self.temperature,
            point_value(self.expected_lo, self.expected_hi),
            self.expected_lo,
            self.expected_hi,
            self.expected_lo + 1.0,
            self.expected_hi + 1.0,
            list(self.length_ge_lo),
            list(self.length_ge_hi),
            self.exact,
            self.variance,
            self.from_node_logprobs,
        )
        return dict(zip(SAMPLING_KEYS, values))


# The keys of a round's ``sampling`` object (replay --temperature --json, docs/output-schema.md), in
# order; batch --temperature's JSON and tables and the API use the same names (one place).
SAMPLING_KEYS = (
    "temperature",
    "expected_accepted_length",  # null unless its bounds are one float (replay.core.point_value)
    "expected_accepted_length_lo",
    "expected_accepted_length_hi",
    "expected_block_efficiency_lo",
    "expected_block_efficiency_hi",
    "length_at_least_lo",  # lists: P(accepted length >= d), d = 1 .. depth of the tree
    "length_at_least_hi",
    "exact",
    "accepted_length_variance",  # null unless exact
    "from_node_logprobs",
)
LENGTH_AT_LEAST_KEYS = ("length_at_least_lo", "length_at_least_hi")


def length_at_least_column(key: str, d: int) -> str:
    """A table's flat column for depth d of a length_at_least list (CSV has no lists): ``length_at_least_lo_2``."""
    return f"{key}_{d}"


def length_at_bounds(ge_lo: np.ndarray, ge_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per round, bounds on P(L = d) = P(L >= d) - P(L >= d + 1), d = 0..D.

    ge_lo, ge_hi: [R, D+1] bounds on P(L >= d), d = 0..D (column 0 is 1; beyond D it is 0). Each side
    pairs with the other's next column, clipped to [0, 1] round by round (valid, and summed over
    rounds still valid: every metric of a distribution is a mean of these).
    """
    zero = np.zeros((ge_lo.shape[0], 1))
    nxt_lo, nxt_hi = np.hstack([ge_lo[:, 1:], zero]), np.hstack([ge_hi[:, 1:], zero])
    return np.clip(ge_lo - nxt_hi, 0.0, 1.0), np.clip(ge_hi - nxt_lo, 0.0, 1.0)


def refused_with_scores(reasons: Iterable[str]) -> int:
    """How many refusals (their reasons) are of rounds with scores (a bad row):
    every one but NO_SCORES. The summaries count those among the rounds with scores."""
    return sum(why != NO_SCORES for why in reasons)


def sampling_skip(name: str, temperature: float, why: str) -> Skipped:
    """The skipped-input entry of a round that sampling mode cannot use at T (every command says it so)."""
    return Skipped(round_entry(name), f"no sampling replay at T = {format_temperature(temperature)}: {why}", ())


class VocabBelowCandidates(SpecReplayError):
    """VocabTooSmall naming the round's scores file. No ValueError on purpose: a round is skipped on
    a ValueError, but a vocabulary size below the recorded candidates is a wrong option (or
    manifest), told once with exit 2."""

    @classmethod
    def naming(cls, scores_path: str, exc: VocabTooSmall) -> VocabBelowCandidates:
        """The message both paths give: the scores file, then the size and what it must reach."""
        return cls(f"{scores_path} (scores): {exc}")


class VocabSizeConflict(SpecReplayError, ValueError):
    """--vocab-size and the manifest's vocab_size disagree: a ValueError to API callers, one line and
    exit 2 to the CLI (every command and the report, without a wrapper of their own)."""


def vocab_size_of(explicit: int | None, recorded: int | None, manifest_path: str | None) -> int | None:
    """The vocabulary size sampling mode uses: --vocab-size, else the manifest's ``vocab_size``.

    Both given and different: VocabSizeConflict, since the bounds above T = 1 are valid only with the
    target's true size and one of the two is wrong.
    """
    if explicit is not None and recorded is not None and explicit != recorded:
        raise VocabSizeConflict(
            f"--vocab-size {explicit} disagrees with {manifest_path or 'manifest.json'} vocab_size {recorded} "
            "(the target's vocabulary size, recorded by the harness): drop --vocab-size, or fix the manifest"
        )
    if explicit is not None:
        return VocabSize(explicit, "--vocab-size")
    return None if recorded is None else VocabSize(recorded, f"{manifest_path or 'manifest.json'}, field vocab_size")


def row_problem_words(
    scores_path: str, ids: np.ndarray, logp: np.ndarray, rows: np.ndarray, code: int, vocab_size: int | None
) -> str:
    """A round's refusal for problem ``code`` of its validate rows: the scores file, the first of
    ``rows`` (the rows the walk reads, in its order) that has the problem, and the words.

    ids, logp: [M, K] the round's validate rows (int64 / float); rows: [n] int64 row indices."""
    rows = rows[rows < ids.shape[0]]
    codes = row_problems(ids[rows], logp[rows], vocab_size)
    hit = rows[codes == code]
    where = f"{scores_path} (scores)" + (f", {row_words(int(hit[0]))}" if hit.shape[0] else "")
    words = problem_words(code, vocab_size)
    if code in (PROBLEM_SUM, PROBLEM_ZERO) and hit.shape[0]:  # the sum itself tells a user which scores are wrong
        row = int(hit[0])
        real = ids[row] != PAD_TOKEN
        words += f": it sums to {float(np.exp(np.asarray(logp[row], dtype=np.float64)[real]).sum()):.6g}"
    return f"{where}: {words}"


def node_columns_words(validate_path: str, columns: int, listed: int) -> str:
    """A round whose node_logprobs has another number of columns than the manifest lists temperatures."""
    return (
        f"{validate_path} (node_logprobs): {columns} column(s) but manifest.json "
        f"node_logprob_temperatures lists {listed}"
    )
