"""The sweep directory: what a sweep runs on, which configs are finished, and the table. No torch:
the client of a cluster sweep uses it without loading a model. Layout of OUT: docs/live-harness.md,
"Sweeps"; a config's directory under dumps/ is committed by one atomic rename (``commit.py``), and
its existence is the resume marker.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.core.config import TreeConfig
from replay.io.table_files import write_frame_csv, write_frame_parquet
from replay.live.errors import SweepError
from replay.util.atomic import atomic_path, write_json_atomic

from .commit import clear_stale
from .grid import config_name

LAYOUT = 2  # the directory's layout (each config's row.json inside its dumps/<name>/), in sweep.json: claim compares it
SETTINGS_FILE = "sweep.json"
DUMPS_DIR = "dumps"
ROW_FILE = "row.json"
COST_CURVE_FILE = "cost_curve.json"
# What one task did with its config.
COMMITTED = "committed"  # ran it and committed the result
DUPLICATE = "duplicate"  # ran it, but another run of the same config had committed first
KEPT = "kept"  # found it committed already and did not run it
# Row columns that depend on the models, prompts and options only, never on timing or on where a
# config ran: two sweeps of the same settings agree on them whatever their workers.
OUTCOME_COLUMNS = (
    "name",
    "config",
    "config_json",
    "gamma",
    "gamma_threshold",
    "nodes",
    "expanded",
    "rounds",
    "new_tokens",
    "mean_acceptance_length",
    "draft_acceptance_rate",
    "mean_accepted_length",
    "identical_to_baseline",
)


@dataclass(frozen=True)
class SweepResult:
    table: Any  # pandas DataFrame, one row per finished config in the order given
    computed: tuple[str, ...]  # configs committed by this call
    skipped: tuple[str, ...]  # configs committed before this call
    duplicates: tuple[str, ...] = ()  # configs run again but committed by another run first


def settings(
    draft: dict[str, str], target: dict[str, str], prompts: Sequence[Sequence[int]], options: dict[str, Any]
) -> dict[str, Any]:
    """What a sweep's outputs depend on: models {path, dtype}, prompts (token ids), decode options.
    Not the device: rows record where they ran, and a resume may run on other devices (or on a
    cluster). Model paths are made absolute, so a relative path and its absolute form agree."""
    models = {role: {**ref, "path": _absolute(ref["path"])} for role, ref in (("draft", draft), ("target", target))}
    return {"layout": LAYOUT, **models, "prompts": [list(p) for p in prompts], "options": dict(options)}


def _absolute(path: str) -> str:
    """An existing path made absolute; a label that is no path (an in-memory model) as it is."""
    p = Path(path)
    return str(p.resolve()) if p.exists() else path


def check_out(out: str | Path, resume: bool) -> None:
    """Refuse an output directory the sweep must not write into: one holding a sweep without
    ``resume`` (it would mix two sweeps' rows), or one holding other files (results.csv, plots/
    and dumps/ there would be overwritten or mixed with the user's). Cheap: the CLI calls it
    before any model loads."""
    out = Path(out)
    if (out / SETTINGS_FILE).is_file():
        if not resume:
            raise SweepError(f"{out} already holds a sweep: pass --resume to continue it, or use a new --out")
    elif out.is_dir() and any(out.iterdir()):
        raise SweepError(f"{out} is not empty and holds no sweep ({SETTINGS_FILE}): choose a new or empty -o/--output")


def claim(out: str | Path, body: dict[str, Any], resume: bool) -> None:
    """Record the settings in a new sweep directory, or check that a resumed one has the same."""
    out = Path(out)
    path = out / SETTINGS_FILE
    check_out(out, resume)
    if not path.is_file():
        write_json_atomic(path, body)
        return
    old = json.loads(path.read_text(encoding="utf-8"))
    new = json.loads(json.dumps(body))
    differ = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
    if differ:
        raise SweepError(f"{out} holds a sweep with other {', '.join(differ)} ({path}); use a new --out")


def open_sweep(out: Path, body: dict[str, Any], resume: bool, configs: Sequence[TreeConfig]) -> list[str]:
    """The start of every sweep, local or on a cluster: ``out`` claimed for settings ``body``
    (``claim``), the staging left by killed runs removed; returns the configs' names in order."""
    claim(out, body, resume)
    clear_stale(dumps_dir(out))
    return [config_name(c) for c in configs]


def sweep_result(out: Path, names: Sequence[str], done: Mapping[str, Sequence[str]]) -> SweepResult:
    """The end of every sweep: the table of ``names`` written again, and the names of the configs
    by what was done with them (``done``: COMMITTED, KEPT, DUPLICATE → names, in order)."""
    return SweepResult(
        write_results_table(out, names),
        tuple(done.get(COMMITTED, ())),
        tuple(done.get(KEPT, ())),
        tuple(done.get(DUPLICATE, ())),
    )


def dumps_dir(out: str | Path) -> Path:
    return Path(out) / DUMPS_DIR


def is_finished(out: str | Path, name: str) -> bool:
    return (dumps_dir(out) / name).is_dir()


def read_rows(out: str | Path, names: Sequence[str]) -> list[dict[str, Any]]:
    rows = []
    for n in names:
        path = dumps_dir(out) / n / ROW_FILE
        if path.is_file():
            row = json.loads(path.read_text(encoding="utf-8"))
            if (
                "block_efficiency" in row and "mean_acceptance_length" not in row
            ):  # a row of a sweep before the rename: the same number
                row["mean_acceptance_length"] = row.pop("block_efficiency")
            rows.append(row)
    return rows


def write_results_table(out: str | Path, names: Sequence[str]):
    """Assemble ``results.csv`` and ``results.parquet`` from the finished rows, through the encoders
    every table file is written by (replay.io.table_files); returns the DataFrame."""
    import pandas as pd

    out = Path(out)
    table = pd.DataFrame(read_rows(out, names))
    with atomic_path(out / "results.csv") as tmp, open(tmp, "wb") as csv_out:
        write_frame_csv(table, csv_out)
    with atomic_path(out / "results.parquet") as tmp:
        write_frame_parquet(table, tmp)
    return table


def new_session() -> str:
    """An id for one invocation of a sweep, recorded in every row it commits."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)
