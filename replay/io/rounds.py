"""A round's matrices in memory, and loading them from a grouped directory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from replay.core.vocab import PAD_TOKEN
from replay.util.words import round_name

from .dumpnames import Key
from .formats.matrix_io import SCORE_AUTO, DumpMatrix, RawSpec, read_matrix
from .grouping import RoundFiles


@dataclass(frozen=True, eq=False)
class Round:
    key: Key  # (a, b) of the validate file
    steps: tuple[DumpMatrix, ...]  # draft_step_0 .. draft_step_{k-1}
    validate: DumpMatrix
    root_token: int = PAD_TOKEN  # the last committed token, when the manifest records it
    layout: str | None = None  # "parents" / "all" when stated, None to detect from shapes

    @classmethod
    def from_lists(
        cls,
        steps: Sequence[Sequence[Sequence[int]]],
        validate: Sequence[Sequence[int]],
        key: Key = (1, 1),
        step_logp: Sequence[Sequence[Sequence[float]] | None] | None = None,
        step_parents: Sequence[Sequence[int] | None] | None = None,
        root_token: int = PAD_TOKEN,
        layout: str | None = None,
    ) -> Round:
        """Hand-built rounds for tests: ``steps[i]`` is draft_step_i's rows of token ids."""
        mats = []
        for i, rows in enumerate(steps):
            lp = step_logp[i] if step_logp is not None else None
            par = step_parents[i] if step_parents is not None else None
            mats.append(DumpMatrix.from_lists(rows, lp, par, path=f"draft_step_{i}"))
        return cls(key, tuple(mats), DumpMatrix.from_lists(validate, path="validate"), root_token, layout)

    @property
    def name(self) -> str:
        return round_name(self.key)


def load_round(
    files: RoundFiles,
    raw: RawSpec | None = None,
    score_kind: str = SCORE_AUTO,
    root_token: int = PAD_TOKEN,
    layout: str | None = None,
) -> Round:
    """Read every matrix of a round; raises DumpError naming the first bad file."""
    steps = tuple(read_matrix(fs.data, "draft", raw, fs.scores, fs.parents, score_kind) for fs in files.steps)
    validate = read_matrix(files.validate.data, "validate", raw, files.validate.scores, None, score_kind)
    return Round(files.key, steps, validate, root_token, layout)
