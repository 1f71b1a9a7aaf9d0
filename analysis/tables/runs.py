"""Load one or more dump directories as labelled runs (the unit every table and plot groups by)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

import pandas as pd

from replay.engine.replayer import DirectoryReplay, ReplayOptions, RoundResult, replay_directory
from replay.engine.runs import RunReplay, replay_run
from replay.util.errors import SpecReplayError
from replay.util.progress import progress_enabled, tqdm_progress


class LazyResults(Sequence):
    """The scalar RoundResults of a batch-replayed run, replayed (reference path) on first use.

    Its length is known from the batch replay, so counting rounds costs nothing; only commands
    that need RoundResult objects (the drawn example round, a caller of the reference functions) pay
    for the round-by-round replay; compare's other configs and gamma strategies replay on the batch
    path (analysis.compare.batch).
    """

    def __init__(
        self, path: str, opts: ReplayOptions, rounds: pd.DataFrame, label: str = "run", progress: bool | None = None
    ):
        self._path = path
        self._opts = opts
        self._label = label
        self._progress = progress
        self._keys = list(zip(rounds["key_a"].tolist(), rounds["key_b"].tolist()))
        # analysis.report.example_round's choice needs only these: it then replays just the round drawn
        self.summaries = (rounds["accepted_length"].tolist(), rounds["stop"].tolist(), self._keys)

    @cached_property
    def _results(self) -> tuple[RoundResult, ...]:
        results = load_reference(self._path, self._label, self._opts, self._progress).results
        if len(results) != len(self._keys):
            raise RuntimeError(
                f"the reference replayed {len(results)} rounds, the batch path {len(self._keys)}: a bug in replay.engine.batch"
            )
        return results

    def __len__(self) -> int:
        return len(self._keys)

    def __getitem__(self, i):
        if isinstance(i, slice) or "_results" in vars(self):
            return self._results[i]
        key = self._keys[i]  # one round: replay only it
        return replay_directory(self._path, replace(self._opts, only_round=key)).results[0]

    def __iter__(self) -> Iterator[RoundResult]:
        return iter(self._results)


@dataclass(frozen=True, eq=False)
class BatchReplay:
    """A run replayed by the batch path, with DirectoryReplay's fields (``results`` lazy)."""

    batch: RunReplay
    results: LazyResults
    options: ReplayOptions = field(default_factory=ReplayOptions)

    directory = property(lambda self: self.batch.directory)
    config = property(lambda self: self.batch.config)
    tree = property(lambda self: self.batch.tree)
    manifest = property(lambda self: self.batch.manifest)
    skipped = property(lambda self: self.batch.skipped)
    config_source = property(lambda self: self.batch.config_source)
    notes = property(lambda self: self.batch.notes)
    warnings = property(lambda self: self.batch.warnings)


@dataclass(frozen=True, eq=False)
class LabelledRun:
    """A replayed dump directory under a short, unique label.

    ``tables``: the run's (round table, node table) when the batch path built them (load_runs);
    analysis.tables.build.build_tables builds them from ``results`` otherwise.
    """

    label: str
    replay: DirectoryReplay | BatchReplay
    tables: tuple[pd.DataFrame, pd.DataFrame] | None = None

    @property
    def results(self):
        return self.replay.results

    @property
    def config(self):
        return self.replay.tree


def unique_labels(dirs: Sequence[str], labels: Sequence[str] | None = None) -> list[str]:
    """Labels for the runs: given ones, else directory names, made unique with ``#2``, ``#3``."""
    if labels:
        if len(labels) != len(dirs):
            raise SpecReplayError(f"--label given {len(labels)} time(s) for {len(dirs)} director(y/ies)")
        base = list(labels)
    else:
        base = [Path(d).resolve().name or str(d) for d in dirs]
    seen: dict[str, int] = {}
    out = []
    for b in base:
        seen[b] = seen.get(b, 0) + 1
        out.append(b if seen[b] == 1 else f"{b}#{seen[b]}")
    return out


def load_runs(
    dirs: Sequence[str],
    opts: ReplayOptions = ReplayOptions(),
    labels: Sequence[str] | None = None,
    progress: bool | None = None,
) -> list[LabelledRun]:
    """Replay every directory or packed run on the batch path, tables included (bad rounds are
    listed in ``run.replay.skipped``, never fatal)."""
    if not dirs:
        raise SpecReplayError("no dump directory given")
    return [load_run(d, label, opts, progress) for label, d in zip(unique_labels(dirs, labels), dirs)]


def load_run(path: str, label: str, opts: ReplayOptions = ReplayOptions(), progress: bool | None = None) -> LabelledRun:
    """One run by the batch path: outcomes, skipped list and tables as the reference would give."""
    from .batch import batch_table_parts, join_parts

    on = progress_enabled() if progress is None else progress
    rep = replay_run(path, opts, progress=on, per_batch=lambda b, res, tree: batch_table_parts(b, res, tree, label))
    tables = join_parts(list(rep.per_batch))
    return LabelledRun(label, BatchReplay(rep, LazyResults(path, opts, tables[0], label, on), opts), tables)


def load_reference(
    path: str, label: str, opts: ReplayOptions = ReplayOptions(), progress: bool | None = None
) -> LabelledRun:
    """One run by the scalar reference path (every RoundResult in memory; tables built from them)."""
    update, close = tqdm_progress(f"replay {label}", progress)
    try:
        return LabelledRun(label, replay_directory(path, opts, update))
    finally:
        close()


# What the harness records per round (replay/live/dumps.py round_entry) beside what the replay of the
# round's files gives: (manifest field, round-table column, words).
RECORDED_OUTCOMES = (
    ("num_nodes", "num_nodes", "draft nodes"),
    ("draft_steps", "num_steps", "draft steps"),
    ("accepted_length", "accepted_length", "accepted length"),
)
ROUNDS_NAMED = 3  # disagreeing rounds quoted in the warning; the rest are counted


def manifest_round_warnings(run: LabelledRun) -> list[str]:
    """ "This number is probably wrong" lines: rounds whose replay disagrees with what the directory's
    manifest.json records for them (shape: nodes and draft steps; and, at temperature 0, the accepted
    length, which the greedy replay must reproduce). Only when the run is replayed with the
    manifest's own config (another --config gives other shapes by design). The file names against
    the manifest's round list are checked when reading (replay.io.manifest.check_manifest_rounds)."""
    manifest = run.replay.manifest
    records = (manifest.body or {}).get("rounds")
    if not isinstance(records, list) or manifest.config is None or manifest.config.tree != run.config:
        return []
    greedy = (manifest.body or {}).get("temperature") == 0
    fields = [f for f in RECORDED_OUTCOMES if greedy or f[0] != "accepted_length"]
    by_key = {tuple(r["key"]): r for r in records if isinstance(r, dict) and isinstance(r.get("key"), list)}
    rounds = (
        run.tables[0]
        if run.tables is not None
        else pd.DataFrame(
            {
                "key_a": [r.key[0] for r in run.results],
                "key_b": [r.key[1] for r in run.results],
                "num_nodes": [r.tree.num_nodes for r in run.results],
                "num_steps": [r.tree.num_steps for r in run.results],
                "accepted_length": [r.acceptance.accepted_length for r in run.results],
            }
        )
    )
    differ: list[str] = []
    n = 0
    for row in rounds[["key_a", "key_b", *[c for _, c, _ in fields]]].itertuples(index=False):
        rec = by_key.get((int(row[0]), int(row[1])))
        if rec is None:
            continue
        n += 1
        bad = [
            f"{words} {int(value)} replayed, {rec[field]!r} recorded ({field})"
            for (field, _, words), value in zip(fields, row[2:])
            if field in rec and rec[field] != int(value)
        ]
        if bad:
            differ.append(f"round {int(row[0])}_{int(row[1])}: " + ", ".join(bad))
    if not differ:
        return []
    more = f"; {len(differ) - ROUNDS_NAMED} more" if len(differ) > ROUNDS_NAMED else ""
    line = (
        f"WARNING: {run.label}: {len(differ)} of {n} round(s) replay differently from what {manifest.path or 'manifest.json'} "
        f"records ({'; '.join(differ[:ROUNDS_NAMED])}{more}); the numbers from this dump are probably wrong: are the files "
        "from another run, or is --layout or --step0-offset wrong?"
    )
    return [line]
