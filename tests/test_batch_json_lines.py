"""write_batch_json_lines (templates per code tuple, columns formatted from arrays) against the
per-round path it replaces: json_line(round_json(i)) for every replayed round, byte for byte."""

from __future__ import annotations

import io
from dataclasses import replace

import numpy as np
import pytest

from replay.core.config import TreeConfig
from replay.core.vocab import PAD_TOKEN
from replay.engine.batch import ERR_OK, ERR_TOKENS, SEL_FALLBACK, BatchResult
from replay.engine.batch.json_lines import write_batch_json_lines
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.in_memory import replay_batches
from replay.testing.records_reference import json_line, records_of_batch, write_json_lines

CFG = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])


def oracle(result: BatchResult) -> str:
    return "".join(json_line(result.round_json(int(i))) for i in np.flatnonzero(result.error == ERR_OK))


def written(result: BatchResult) -> tuple[int, str]:
    out = io.StringIO()
    return write_batch_json_lines(result, out), out.getvalue()


def synth_result(seed: int) -> BatchResult:
    """Rounds of several shapes and layouts, early stops, scores or parents."""
    specs = [
        SynthSpec(CFG, 40, seed=seed, layout="all", with_scores=True),
        SynthSpec(CFG, 30, steps=2, seed=seed + 1, layout="parents", with_scores=False, first_key=5000),
        SynthSpec(CFG, 30, seed=seed + 2, with_scores=True, with_parents=True, first_key=9000),
    ]
    return replay_batches([synth_batch(s) for s in specs], CFG, workers=1)


def edited(result: BatchResult, seed: int) -> BatchResult:
    """Every per-round special case a line can hold, put on random rounds by hand."""
    rng = np.random.default_rng(seed)
    r = len(result)
    pick = lambda k: rng.choice(r, size=k, replace=False)  # noqa: E731
    selection = result.selection.copy()
    selection[rng.integers(0, result.gamma), pick(5)] = SEL_FALLBACK
    extra = result.validate_extra_rows.copy()
    extra[pick(5)] = rng.integers(1, 4, size=5)
    bonus = result.bonus_token.copy()
    bonus[pick(10)] = PAD_TOKEN
    roots = result.root_tokens.copy()
    roots[pick(10)] = PAD_TOKEN
    error = result.error.copy()
    error[pick(4)] = ERR_TOKENS
    length = result.accepted_length.copy()
    length[pick(6)] = 0
    notes = {int(i): ("parents and scores disagree at step 1 {x}", 'quote " and \\ and é') for i in pick(6)}
    return replace(
        result,
        selection=selection,
        validate_extra_rows=extra,
        bonus_token=bonus,
        root_tokens=roots,
        error=error,
        accepted_length=length,
        selection_notes=notes,
    )


@pytest.mark.parametrize("seed", range(4))
def test_lines_equal_the_per_round_path(seed):
    result = edited(synth_result(seed), seed)
    want = oracle(result)
    # the cases are really there
    assert '"notes": []' in want and "disagree" in want and "ignored as padding" in want and "fallback" in want
    assert '"root_token": null' in want and '"bonus_token": null' in want and '"accepted_tokens": []' in want
    count, text = written(result)
    assert count == int((result.error == ERR_OK).sum()) == want.count("\n")
    assert text == want


def test_lines_equal_the_records_written_one_by_one():
    result = edited(synth_result(5), 5)
    out = io.StringIO()
    count = write_json_lines(records_of_batch(result), out)
    assert written(result) == (count, out.getvalue())


def test_no_replayed_round_writes_nothing():
    result = synth_result(0)
    count, text = written(replace(result, error=np.full_like(result.error, ERR_TOKENS)))
    assert (count, text) == (0, "")


def test_many_lines_cross_write_blocks(monkeypatch):
    from replay.engine.batch import json_lines

    monkeypatch.setattr(json_lines, "_JSON_ROWS_PER_BLOCK", 1000)  # 2500 lines: three blocks, templates in each
    result = replay_batches([synth_batch(SynthSpec(CFG, 2500, seed=3))], CFG, workers=1)
    assert written(result) == (2500, oracle(result))
