"""Why a round has no sampling replay at T: the problem codes of its recorded validate rows (PROBLEM_*,
0 = usable) and their words, and the vocabulary size the rule checks rows against (VocabSize
remembers where it came from, so a message names the source to fix).
"""

from __future__ import annotations

from replay.util.errors import SpecReplayError

# Recorded probabilities are float32 log-softmax values: a row may sum to 1 + a few ulps.
ROW_SUM_TOLERANCE = 1e-5


# Per-round problem codes (0 = usable); callers skip such rounds with PROBLEM_WORDS[code].
PROBLEM_NONE, PROBLEM_NAN, PROBLEM_POSITIVE, PROBLEM_SUM, PROBLEM_VOCAB, PROBLEM_ZERO = 0, 1, 2, 3, 4, 5


PROBLEM_WORDS = {
    PROBLEM_NAN: "a validate row used by the walk holds a NaN log-probability",
    PROBLEM_POSITIVE: "a validate row used by the walk holds a log-probability > 0 (or +inf)",
    PROBLEM_SUM: f"a validate row's probabilities sum to more than 1 (+{ROW_SUM_TOLERANCE:g})",
    # m > (V - n) * q_min: the V - n unnamed tokens, each at most the row's smallest p, cannot hold m
    PROBLEM_VOCAB: "a validate row contradicts the vocabulary size: its unrecorded mass 1 - sum(p) is more than "
    "the V - n tokens it does not name can hold (each at most its smallest p; a row naming all V tokens must sum to 1)",
    # q_K = 0: no unnamed token can hold any mass, whatever V
    PROBLEM_ZERO: "a validate row holds a zero probability, so every token it does not name has p = 0 too, yet its "
    f"probabilities sum to less than 1 (by more than {ROW_SUM_TOLERANCE:g}): it is no top-K row of any distribution",
}


class VocabSize(int):
    """A vocabulary size that remembers where it came from ("--vocab-size", "manifest.json vocab_size"):
    a message about a row that contradicts it names the source (the user fixes that one)."""

    source: str

    def __new__(cls, value: int, source: str) -> VocabSize:
        out = super().__new__(cls, value)
        out.source = source
        return out


class VocabTooSmall(SpecReplayError, ValueError):
    """A vocabulary size below a row's recorded candidates: the option (or manifest) is wrong for the
    dump, not one round: every path stops with one line and exit 2, naming the scores file where the
    dump has files (replay.engine.sampling.VocabBelowCandidates; on the batch arrays the widest row's)."""


def vocab_too_small(vocab_size: int | None, k: int) -> VocabTooSmall:
    return VocabTooSmall(
        f"{vocab_words(vocab_size)}: smaller than the {k} recorded candidates per row; "
        f"it must be at least {k} (the target's vocabulary size)"
    )


def vocab_words(vocab_size: int | None) -> str:
    """``vocab size V (from SOURCE)``, the source when the number carries one (VocabSize)."""
    source = getattr(vocab_size, "source", None)
    return f"vocab size {vocab_size}" + (f" (from {source})" if source else "")


def problem_words(code: int, vocab_size: int | None = None) -> str:
    """PROBLEM_WORDS[code], with the vocabulary size and its source for PROBLEM_VOCAB."""
    why = PROBLEM_WORDS[code]
    return f"{why}; {vocab_words(vocab_size)}" if code == PROBLEM_VOCAB else why
