"""The comparison at T: the run read block by block, every config's outcomes folded as they are made
into exactly rounded sums (order-independent), the refused rounds kept as arrays and listed in run
order (SkippedRounds); the outcomes themselves are kept only for the per-round frame.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from analysis.tables.runs import each_batch
from replay.core.config import TreeConfig
from replay.engine.batch import BatchResult, RoundBatch
from replay.util.rows import unique_rows

from .sampling import (
    REACHED,
    SAMPLING_COLUMNS,
    SAMPLING_PER_ROUND_COLUMNS,
    ExactSum,
    SamplingComparison,
    summarize_sampling_sums,
)
from .sampling_parts import NOT_REFUSED, RefusalKey, SamplingPart, sampling_parts
from .sampling_subtrees import AtT
from .subtree import reason_text, reason_texts


def curve_sums(
    run, configs, temperatures, vocab_size, threshold, progress, node_temperatures=None, per_round=False
) -> SamplingComparison:
    """Every config at every T on each batch, the batch's rounds folded into FoldedSums as it comes (the
    sums are exactly rounded: order-independent); the batches are those load_run kept
    (``run.batches``), else the run read again block by block (as analysis.tables.stream reads it).
    What stays per round is the refused rounds' ordinal, name and code (the skipped list), and with
    ``per_round`` every outcome (the per-round frame). node_temperatures: the manifest's
    node_logprob_temperatures (sampling_parts)."""
    sums, per_batch = folded_sums(configs, temperatures, vocab_size, threshold, node_temperatures, per_round)
    done, total = 0, run.rounds
    # the kept batches on as many threads as a reading replays on: the sums are order-independent
    for chunk in each_batch(run, per_batch):
        done += sum(chunk)
        if progress:
            progress(done, total)
    check_every_round(done, run, "compare")
    return sums.comparison(run.config)


def folded_sums(
    configs: Sequence[TreeConfig],
    temperatures: Sequence[float],
    vocab_size: int | None,
    threshold: float,
    node_temperatures: Sequence[float] | None,
    per_round: bool = False,
) -> tuple[FoldedSums, Callable[[RoundBatch, BatchResult, TreeConfig], int]]:
    """An empty FoldedSums (keeping every outcome for the per-round frame where ``per_round``) and the
    per_batch (replay.engine.runs.PerBatch) that folds a batch's rounds into it, on the replay's
    threads, and returns how many rounds it folded."""
    sums = FoldedSums(configs, temperatures, per_round)

    def per_batch(batch: RoundBatch, res: BatchResult, tree: TreeConfig) -> int:
        parts = sampling_parts(
            batch, res, tree, configs, temperatures, sums.fold, vocab_size, threshold, node_temperatures
        )
        with sums.lock:
            sums.add(parts)
        return sum(p.ordinals.shape[0] for p in parts)

    return sums, per_batch


def check_every_round(done: int, run, command: str) -> None:
    """Every replayed round of ``run`` came back once (``done`` of them): else a bug in the batch path."""
    if done != run.rounds:
        raise RuntimeError(
            f"{command} replayed {done} rounds of {run.label}, the run has {run.rounds}: a bug in the batch path"
        )


class FoldedSums:
    """Per (config, T) what summarize_sampling_sums reads, from rounds added in any order: counts and
    the determined rounds' bounds' exactly rounded sums (ExactSum); the refused rounds, put in run
    order at the end (the skipped list); with ``per_round``, every outcome and every round's name too
    (the per-round frame)."""

    def __init__(self, configs: Sequence[TreeConfig], temperatures: Sequence[float], per_round: bool = False) -> None:
        self.configs, self.temperatures = list(configs), list(temperatures)
        self.acc = {(c, t): _Acc(configs[c].gamma) for c in range(len(configs)) for t in temperatures}
        # with the per-round frame: per (config, T) each fold's (ordinals, AtT); every add's (ordinals, names)
        self.kept: dict[tuple[int, float], list[tuple[np.ndarray, AtT]]] | None = {} if per_round else None
        self.names: list[tuple[np.ndarray, np.ndarray]] = []
        # per refusal key: the refused rounds' (ordinals, names, reasons) of each add, kept as arrays
        self.refused: dict[RefusalKey, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
        self.keys: dict[float, RefusalKey] = {}  # each T's key (SamplingPart.keys)
        self.needs_vocab: set[int] = set()  # the configs some round of which needs a vocabulary size
        self.lock = threading.Lock()

    def add(self, parts: Sequence[SamplingPart]) -> None:
        """The refused rounds of ``parts`` (their outcomes were folded as they were made); callers on
        the replay's threads hold ``lock``."""
        if not parts:
            return
        ords = np.concatenate([p.ordinals for p in parts])
        order = np.argsort(ords, kind="stable")
        self.keys = parts[0].keys
        refused = {key: np.concatenate([p.refused[key] for p in parts])[order] for key in parts[0].refused}
        bad_at = {key: np.flatnonzero(codes != NOT_REFUSED) for key, codes in refused.items()}
        names = np.zeros(0, dtype=object)  # named only where read: the refused rounds, the per-round frame
        if self.kept is not None or any(bad.shape[0] for bad in bad_at.values()):
            names = np.concatenate([p.names for p in parts])[order]
        if self.kept is not None:
            self.names.append((ords[order], names))
        for key, bad in bad_at.items():
            why = np.concatenate([p.why[key] for p in parts])[order]
            self.refused.setdefault(key, []).append((ords[order[bad]], names[bad], why[bad]))

    def fold(self, c: int, t: float, at: AtT, ordinals: np.ndarray) -> None:
        """Config ``c`` at ``t`` on some usable rounds (sampling_parts' fold; from the replay's threads)."""
        with self.lock:
            if at.needs_vocab:
                self.needs_vocab.add(c)
            self.acc[(c, t)].add(at, ordinals)
            if self.kept is not None:
                self.kept.setdefault((c, t), []).append((ordinals, at))

    def comparison(self, recorded: TreeConfig, only: Sequence[int] | None = None) -> SamplingComparison:
        """The SamplingComparison of the configs at positions ``only`` (default: all), in that order."""
        shown = range(len(self.configs)) if only is None else only
        by_key = {}
        for key, adds in self.refused.items():
            ords = np.concatenate([a[0] for a in adds])
            order = np.argsort(ords, kind="stable")
            by_key[key] = (np.concatenate([a[1] for a in adds])[order], np.concatenate([a[2] for a in adds])[order])
        skipped = SkippedRounds(self.temperatures, by_key, self.keys)
        rows = [self.acc[(c, t)].row(self.configs[c], recorded, t) for c in shown for t in self.temperatures]
        table = pd.DataFrame(rows, columns=SAMPLING_COLUMNS)
        undetermined: dict[str, Counter] = {}
        for c in shown:  # the per-round frame's order: config, T, then run order
            for t in self.temperatures:
                texts = undetermined.setdefault(self.configs[c].short(), Counter())
                for text, k in self.acc[(c, t)].reasons():
                    texts[text] += k
        needs_vocab = any(c in self.needs_vocab for c in shown)
        return SamplingComparison(table, self._per_round(shown), skipped, needs_vocab, undetermined)

    def _per_round(self, shown: Sequence[int]) -> pd.DataFrame:
        """The per-round frame of the configs ``shown``: config, T, then run order (empty without ``per_round``)."""
        frames = []
        if self.kept is not None and self.names:
            ords = np.concatenate([o for o, _ in self.names])
            order = np.argsort(ords, kind="stable")
            ords, names = ords[order], np.concatenate([n for _, n in self.names])[order]
            for c in shown:
                for t in self.temperatures:
                    pieces = self.kept.get((c, t), [])
                    if not pieces:
                        continue
                    at_ords = np.concatenate([o for o, _ in pieces])
                    by_run = np.argsort(at_ords, kind="stable")
                    at = AtT.concat([a for _, a in pieces]).take(by_run)
                    frames.append(_frame(self.configs[c], t, names[np.searchsorted(ords, at_ords[by_run])], at))
        if not frames:
            return pd.DataFrame([], columns=SAMPLING_PER_ROUND_COLUMNS)
        return pd.DataFrame({k: np.concatenate([f[k] for f in frames]) for k in SAMPLING_PER_ROUND_COLUMNS})


def _frame(cfg: TreeConfig, t: float, names: np.ndarray, at: AtT) -> dict[str, np.ndarray]:
    """One (config, T)'s per-round columns (SAMPLING_PER_ROUND_COLUMNS); ``names`` [C] of the rounds of ``at``."""
    n = names.shape[0]
    return {
        "config": np.full(n, cfg.short(), dtype=object),
        "temperature": np.full(n, float(t)),
        "round": names.astype(object),
        "determined": at.determined,
        "expected_accepted_length_lo": at.lo,
        "expected_accepted_length_hi": at.hi,
        "exact": at.exact,
        "reason": reason_texts(at.why, at.depth, at.rank, REACHED),
    }


_NONE = (np.zeros(0, dtype=object), np.zeros(0, dtype=object))  # no refused round at a T


class SkippedRounds(Sequence):
    """SamplingComparison.skipped, the (round, T, reason) of every refused round at every T (T by T,
    rounds in run order), made as read from the refused rounds' arrays: a run without scores is
    refused at every T > 0, 15 tuples a round on the default grid (1.5 GB at 10^6 rounds as a list)."""

    def __init__(
        self,
        temperatures: Sequence[float],
        by_key: dict[RefusalKey, tuple[np.ndarray, np.ndarray]],
        keys: dict[float, RefusalKey],
    ):
        self.temperatures, self.by_key = list(temperatures), by_key  # refusal key -> (names, reasons)
        # each T's (names, reasons): temperatures of one key share the arrays, kept once
        self.at = [by_key.get(keys[t], _NONE) if keys else _NONE for t in self.temperatures]
        self.sizes = [len(names) for names, _ in self.at]

    def __len__(self) -> int:
        return sum(self.sizes)

    def only_reason(self, positive: bool, why: str) -> bool:
        """Whether each round refused at the temperatures with T > 0 (``positive``) or T = 0 is refused for ``why``."""
        return all(
            bool((reasons == why).all()) for t, (_, reasons) in zip(self.temperatures, self.at) if (t > 0.0) == positive
        )

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = i + len(self) if i < 0 else i
        for t, (names, why) in zip(self.temperatures, self.at):
            if 0 <= i < len(names):
                return (str(names[i]), t, str(why[i]))
            i -= len(names)
        raise IndexError("skipped round index out of range")

    def __iter__(self):
        for t, (names, why) in zip(self.temperatures, self.at):
            for name, text in zip(names.tolist(), why.tolist()):
                yield (str(name), t, str(text))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


class _Acc:
    """One (config, T)'s sums (FoldedSums): counts, and one ExactSum of [lo, hi, P(L >= d) lo.., hi..]."""

    def __init__(self, gamma: int) -> None:
        self.gamma = gamma
        self.n = self.nd = self.exact = self.undet_hi = 0
        self.sums = ExactSum(2 + 2 * gamma)
        self.why: dict[tuple[int, int, int], list[int]] = {}  # (why, depth, rank) -> [rounds, first ordinal]

    def add(self, at: AtT, ordinals: np.ndarray) -> None:
        det = at.determined
        nd = int(np.count_nonzero(det))
        self.n += int(det.shape[0])
        self.nd += nd
        self.exact += int(np.count_nonzero(at.exact & det))
        if nd < det.shape[0]:
            self._count_reasons(at, ordinals)
            self.undet_hi += int(at.steps_hi[~det].sum())
        # the determined rows of [lo, hi, P(L >= d) lo.., hi..], read where they lie
        self.sums.add_outcomes(at.lo, at.hi, at.ge_lo, at.ge_hi, np.ascontiguousarray(det))

    def _count_reasons(self, at: AtT, ordinals: np.ndarray) -> None:
        """The undetermined rounds' (why, depth, rank), counted, with the first round of each: folds come
        in any order, and a tie between two reasons goes to the one met first in run order (the per-round
        frame's Counter keeps that order)."""
        und = np.flatnonzero(~at.determined)
        if not und.shape[0]:
            return
        codes, which = unique_rows(np.stack([at.why[und].astype(np.int64), at.depth[und], at.rank[und]], axis=1))
        counts = np.bincount(which, minlength=codes.shape[0])
        first = np.full(codes.shape[0], np.iinfo(np.int64).max)
        np.minimum.at(first, which, ordinals[und])
        for code, k, f in zip(map(tuple, codes.tolist()), counts.tolist(), first.tolist()):
            seen = self.why.setdefault(code, [0, f])
            seen[0] += k
            seen[1] = min(seen[1], f)

    def reasons(self) -> list[tuple[str, int]]:
        """(reason text, rounds) of the undetermined rounds, in the order each was first met in the run."""
        out = sorted(self.why.items(), key=lambda item: item[1][1])
        return [(reason_text(w, d, r, REACHED), k) for (w, d, r), (k, _) in out]

    def row(self, cfg: TreeConfig, recorded: TreeConfig, t: float) -> dict:
        s = self.sums.sums()
        ge_sums = s[2:].reshape(2, cfg.gamma)
        return summarize_sampling_sums(
            cfg, recorded, t, self.n, self.nd, self.exact, s[0], s[1], ge_sums, float(self.undet_hi)
        )
