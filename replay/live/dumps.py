"""Adapter from harness rounds to the dump format (``replay.io.dumpwrite``): files and manifest.

Round key: ``a`` = position of the root token in its sequence (0-based, prompt included),
``b = a + sequence_index * LIVE_KEY_STRIDE``. Step 0 is named one position earlier (step0_offset 1),
like the engine's files. Every file is written atomically.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from replay.core.config import TreeConfig
from replay.io.dumpwrite import StepRecord, write_manifest, write_round
from replay.util.atomic import umask_mode

from .draft import DraftedTree
from .errors import OutputDirError
from .generate import SEED_RULE, Generation, LiveRound, RoundHook
from .verify import Verification

LIVE_KEY_STRIDE = 1_000_000
STEP0_OFFSET = 1
KEY_RULE = (
    "a = position of the round's root token in its sequence (0-based, prompt included); "
    f"b = a + sequence_index * {LIVE_KEY_STRIDE}; draft_step_0 is named (a - 1, b - 1)"
)


def round_key(root_pos: int, sequence_index: int) -> tuple[int, int]:
    if root_pos < 1:
        raise ValueError("dumps need prompts of at least 2 tokens (step 0's file is named at root position - 1)")
    return root_pos, root_pos + sequence_index * LIVE_KEY_STRIDE


def round_writer(out_dir: str | Path, sequence_index: int) -> RoundHook:
    """A hook for ``speculative_generate`` that writes each round's draft_step_* and validate_* files."""

    def write(rnd: LiveRound, drafted: DraftedTree, ver: Verification) -> None:
        if ver.validate is None:
            raise ValueError("round has no validate matrix: run speculative_generate with record=True to write dumps")
        write_round(out_dir, round_key(rnd.root_pos, sequence_index), drafted.steps, ver.validate, STEP0_OFFSET)

    return write


class RoundBuffer:
    """Rounds kept in memory (ids and scores, no logits) and written later, so that a timed run
    pays a list append per round instead of file writes."""

    def __init__(self) -> None:
        self._rounds: list[tuple[tuple[int, int], tuple[StepRecord, ...], StepRecord]] = []

    def hook(self, sequence_index: int) -> RoundHook:
        def keep(rnd: LiveRound, drafted: DraftedTree, ver: Verification) -> None:
            self._rounds.append((round_key(rnd.root_pos, sequence_index), tuple(drafted.steps), ver.validate))

        return keep

    def write(self, out_dir: str | Path) -> None:
        for key, steps, validate in self._rounds:
            write_round(out_dir, key, steps, validate, STEP0_OFFSET)


def round_entry(rnd: LiveRound, sequence_index: int) -> dict[str, Any]:
    return {
        "key": list(round_key(rnd.root_pos, sequence_index)),
        "sequence": sequence_index,
        "root_token": rnd.root_token,
        "accepted_nodes": list(rnd.accepted_nodes),
        "accepted_length": rnd.accepted_length,
        "bonus_token": rnd.bonus_token,
        "committed_tokens": list(rnd.committed_tokens),
        "num_nodes": rnd.num_nodes,
        "draft_steps": rnd.draft_steps,
        "draft_time_s": rnd.draft_time_s,
        "verify_time_s": rnd.verify_time_s,
    }


def run_manifest(
    config: TreeConfig,
    models: dict[str, dict[str, str]],
    run: dict[str, Any],
    generations: Sequence[Generation],
    totals: dict[str, Any],
) -> dict[str, Any]:
    """The manifest body: ``models`` {draft, target: {path, dtype}}; ``run`` holds tokenizer, dtype,
    device, temperature, seed and anything else the caller wants on record."""
    return {
        "config": config.to_json(),
        "layout": "all",
        "score_kind": "logprob",
        "score_temperature": 1.0,
        "step0_offset": STEP0_OFFSET,
        "key_rule": KEY_RULE,
        "seed_rule": SEED_RULE,
        "models": models,
        **run,
        "sequences": [{"prompt_ids": list(g.prompt_ids), "output_ids": list(g.output_ids)} for g in generations],
        "rounds": [round_entry(r, s) for s, g in enumerate(generations) for r in g.rounds],
        "totals": totals,
    }


def write_run_manifest(out_dir: str | Path, manifest: dict[str, Any]) -> Path:
    return write_manifest(out_dir, manifest)


def check_output_dir(out: str | Path, replace: bool = False) -> None:
    """Refuse an ``out`` that is a file, or a directory that already holds files (unless ``replace``):
    a second run written into it would mix with the first (the manifest lists one run's rounds, a
    replay reads every round file)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputDirError(f"{out}: exists and is not a directory")
    if not replace and out.is_dir() and any(out.iterdir()):
        raise OutputDirError(
            f"{out}: output directory is not empty; choose another -o/--output, or pass --replace to replace it"
        )


@contextmanager
def staged_output_dir(out: str | Path, replace: bool = False) -> Iterator[Path]:
    """Yield a new empty directory beside ``out`` to write a run into; when the block succeeds it
    becomes ``out`` (an old ``out`` is swapped out and deleted when ``replace``), when it fails it
    is deleted. Checked on entry (``check_output_dir``), so a refusal costs nothing."""
    out = Path(os.path.abspath(out))  # "." and "x/.." have no name to put beside
    check_output_dir(out, replace)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    staged.chmod(umask_mode(0o777))  # mkdtemp makes it private; the published run should not be
    try:
        yield staged
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    _publish(staged, out, replace)


def _publish(staged: Path, out: Path, replace: bool) -> None:
    """Rename ``staged`` to ``out``. An old non-empty ``out`` is first renamed aside, then deleted:
    between the two renames ``out`` is briefly absent, never a mix of two runs."""
    try:
        check_output_dir(out, replace)  # again: something may have written there during the run
    except OutputDirError as exc:
        raise OutputDirError(f"{exc} (it was filled during the run; this run is kept in {staged})") from None
    if out.is_dir() and any(out.iterdir()):
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        os.replace(out, old)  # over the empty directory mkdtemp made
        os.replace(staged, out)
        shutil.rmtree(old)
    else:
        os.replace(staged, out)  # POSIX rename may replace an empty directory
