"""Load one or more dump directories as labelled runs (the unit every table and plot groups by)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from replay.errors import SpecReplayError
from replay.progress import tqdm_progress
from replay.replayer import DirectoryReplay, ReplayOptions, replay_directory


@dataclass(frozen=True, eq=False)
class LabelledRun:
    """A replayed dump directory under a short, unique label."""

    label: str
    replay: DirectoryReplay

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
    """Replay every directory (bad rounds are listed in ``run.replay.skipped``, never fatal)."""
    if not dirs:
        raise SpecReplayError("no dump directory given")
    out = []
    for label, d in zip(unique_labels(dirs, labels), dirs):
        update, close = tqdm_progress(f"replay {label}", progress)
        try:
            out.append(LabelledRun(label, replay_directory(d, opts, update)))
        finally:
            close()
    return out
