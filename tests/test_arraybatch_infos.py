"""The bulk array reader's classification of a chunk's rounds (arraybatch._array_infos): its string
checks over the whole chunk must give, for every chunk, what file_kind gives file by file
(arraybatch._array_files, the oracle), wherever the paths put dots, separators and companions."""

from __future__ import annotations

import os

import pytest

import replay.io.formats.arraybatch as arraybatch
from replay.io.roundbatch import RoundPaths


def chunk(names: list[list[tuple[str, str | None, str | None]]], head: str = "dump/") -> list[RoundPaths]:
    """Rounds of (data, scores, parents) names, each prefixed with ``head`` (None stays None)."""

    def at(name: str | None) -> str | None:
        return None if name is None else head + name

    return [
        (k, (10 + k, 20 + k), tuple((at(d), at(s), at(p)) for d, s, p in files), 7) for k, files in enumerate(names)
    ]


def plain(
    ext: str, rounds: int = 3, steps: int = 2, scores: str | None = None
) -> list[list[tuple[str, str | None, str | None]]]:
    """Rounds of draft steps and a validate named as an engine names them; ``scores``: the companion's tail."""
    out = []
    for r in range(rounds):
        stems = [f"draft_step_{s}_{r}_{r + 4}" for s in range(steps)] + [f"validate_{r}_{r + 4}"]
        out.append([(f"{st}{ext}", None if scores is None else f"{st}{scores}", None) for st in stems])
    return out


def oracle(items: list[RoundPaths]) -> list:
    return [arraybatch._array_files(item[2]) for item in items]


CASES = {
    "npz": chunk(plain(".npz")),
    "npy": chunk(plain(".npy")),
    "upper case": chunk(plain(".NPZ")),
    "npy with .scores.npy": chunk(plain(".npy", scores=".scores.npy")),
    "npy with .scores.npz": chunk(plain(".npy", scores=".scores.npz")),
    "npy with text .scores": chunk(plain(".npy", scores=".scores")),
    "relative names": chunk(plain(".npz"), head=""),
    "dotted directory": chunk(plain(".npz"), head="./runs.v2/dump.d/"),
    "text": chunk(plain("")),
    "pt": chunk(plain(".pt")),
    "one round .npy": chunk(plain(".npz")[:2] + plain(".npy")[2:]),
    "one file .npy": chunk([[*plain(".npz")[0][:-1], ("validate_0_4.npy", None, None)], *plain(".npz")[1:]]),
    "a companion for some": chunk(
        [[("draft_step_0_1_5.npy", "draft_step_0_1_5.scores.npy", None), ("validate_1_5.npy", None, None)]]
    ),
    "draft parents": chunk(
        [[("draft_step_0_1_5.npz", None, "draft_step_0_1_5.parents.npz"), ("validate_1_5.npz", None, None)]]
    ),
    "validate parents (never read)": chunk(
        [[("draft_step_0_1_5.npz", None, None), ("validate_1_5.npz", None, "validate_1_5.parents.npz")]]
    ),
    "a second dot": chunk([[("draft_step_0_1_5.v.npz", None, None), ("validate_1_5.npz", None, None)]]),
    "the extension alone": chunk([[("draft_step_0_1_5.npz", None, None), (".npz", None, None)]]),
    "the extension alone, relative": chunk([[("draft_step_0_1_5.npz", None, None), (".npz", None, None)]], head=""),
    "the extension alone in a subdirectory": chunk(
        [[("draft_step_0_1_5.npz", None, None), (f"sub{os.sep}.npz", None, None)]]
    ),
    "a subdirectory": chunk([[("draft_step_0_1_5.npz", None, None), (f"sub{os.sep}validate_1_5.npz", None, None)]]),
    "another directory": chunk(plain(".npz"))[:1] + chunk(plain(".npz"), head="other/")[1:],
    "the extension alone in another directory": [
        (
            0,
            (1, 5),
            ((f"x{os.sep}.{os.sep}d{os.sep}draft_step_0_1_5.npz", None, None), (f"y{os.sep}.npz", None, None)),
            7,
        )
    ],
    "a dot at the end": chunk([[("draft_step_0_1_5.", None, None), ("validate_1_5.", None, None)]]),
    "the extension inside a name": chunk([[("draft_step_0_1_5.npz", None, None), ("validate.npz_1_5", None, None)]]),
    "empty": [],
}


@pytest.mark.parametrize("name", list(CASES))
def test_chunk_classified_as_file_by_file(name):
    items = CASES[name]
    assert arraybatch._array_infos(items) == oracle(items)


def test_common_chunks_take_the_fast_path(monkeypatch):
    """An engine's chunk asks file_kind once, not once a file (the point of the checks)."""
    calls = []
    real = arraybatch.file_kind
    monkeypatch.setattr(arraybatch, "file_kind", lambda *a: calls.append(a) or real(*a))
    for name in ("npz", "npy with .scores.npy", "dotted directory", "relative names"):
        calls.clear()
        arraybatch._array_infos(CASES[name])
        assert len(calls) == 1, name
