"""A chunk's rejection conditions: each round's first fault, recorded with its place."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Checks:
    """Per-round rejection conditions in checking order; the first that holds is the round's
    reason, recorded with its place (BatchResult.error / error_at; replay.engine.batch.rejections words it)."""

    # (holds [C] bool, ERR_* code, draft step, row [C] int64 or int, detail [C] int64 or int)
    conds: list = field(default_factory=list)

    def add(self, cond: np.ndarray, code: int, step: int = -1, row=-1, detail=-1) -> None:
        if cond.any():
            self.conds.append((cond, code, step, row, detail))

    def reasons(self, c: int) -> tuple[np.ndarray, np.ndarray]:
        """([C] int8 code, [3, C] int64 (step, row, detail)) of the first condition that holds in each
        round; ERR_OK and -1 where none does."""
        err = np.zeros(c, dtype=np.int8)
        at = np.full((3, c), -1, dtype=np.int64)
        for cond, code, *place in reversed(self.conds):
            err = np.where(cond, np.int8(code), err)
            for k, value in enumerate(place):
                at[k] = np.where(cond, value, at[k])
        return err, at
