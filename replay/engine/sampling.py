"""Sampling-mode replay of replayed rounds: replay.core.sampling applied to RoundResults.

The rule (and its bounds) lives in replay.core.sampling; this module only says which rounds can
use it (their validate rows carry scores) and turns one round's bounds into plain numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

from replay.core.sampling import PROBLEM_WORDS, check_temperature, greedy_logp, round_bounds

NO_SCORES = "its validate rows have no scores (sampling mode needs the target's log-probs; docs/dump-format.md)"


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

    def to_json(self) -> dict:
        return {
            "temperature": self.temperature,
            "expected_accepted_length": self.expected_lo if self.exact else None,
            "expected_accepted_length_lo": self.expected_lo,
            "expected_accepted_length_hi": self.expected_hi,
            "expected_block_efficiency_lo": self.expected_lo + 1.0,
            "expected_block_efficiency_hi": self.expected_hi + 1.0,
            "length_at_least_lo": list(self.length_ge_lo),
            "length_at_least_hi": list(self.length_ge_hi),
            "exact": self.exact,
            "accepted_length_variance": self.variance,
        }


def round_sampling(res, temperature: float, vocab_size: int | None = None) -> RoundSampling:
    """Bounds for a replay.engine.replayer.RoundResult; ValueError (the reason) when it cannot be used."""
    logp = res.validate_logp
    if logp is None:
        if check_temperature(temperature) != 0.0:
            raise ValueError(NO_SCORES)
        logp = greedy_logp(res.validate_ids)  # T = 0 reads only the top-1 column
    b = round_bounds(res.tree, res.validate_ids, logp, res.layout, temperature, vocab_size)
    if b.problem[0]:
        raise ValueError(PROBLEM_WORDS[int(b.problem[0])])
    exact = bool(b.exact[0])
    return RoundSampling(
        b.temperature,
        float(b.expected_lo[0]),
        float(b.expected_hi[0]),
        tuple(float(x) for x in b.length_ge_lo[0, 1:]),
        tuple(float(x) for x in b.length_ge_hi[0, 1:]),
        exact,
        float(b.variance[0]) if exact else None,
        b.needs_vocab,
    )
