"""The sub-config replay alone (analysis.compare.subtree_batch.replay_contained_many) on every piece of a
run, this tree's module against another tree's (an exported copy: ``git archive REV | tar -x -C DIR``),
alternated in one process; every outcome field is checked equal first.

    nice -n 10 python bench/subconfig_replay.py RUN --before DIR [--repeats 3] [--threshold 0.3]

Prints CPU seconds per repeat for compare's 3 configs (docs/benchmarks.md's command) and for 4 configs
of one prefix (recommend's top shapes on bench/million.py's run). docs/benchmarks.md, "compare and
recommend at a million rounds".
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import analysis.compare.subtree_batch as this  # noqa: E402
from replay.core.config_grammar import parse_config_text  # noqa: E402
from replay.engine.batch import (  # noqa: E402
    expanded_nodes,
    replay_batch,
    replayed_by_shape,
)
from replay.engine.runs import open_run  # noqa: E402

CONFIGS = {
    "compare's 3": ["[6]|[2,2]|[1,1]", "[4]|[2,2]|[1,1]", "[8]|[2,2]"],
    "4 of one prefix": [
        "[4]|[2,2,2,1]|[1,1,1,1,1]",
        "[4]|[2,2,2,1]|[1,1,1,1]",
        "[4]|[2,2,2,1]|[1,1,1]",
        "[4]|[2,2,2]|[1,1,1]",
    ],
}


def module_of(tree: Path):
    """The other tree's subtree_batch, imported beside this one (it imports this tree's other modules)."""
    spec = importlib.util.spec_from_file_location(
        "analysis.compare.subtree_batch_before", tree / "analysis/compare/subtree_batch.py"
    )
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "analysis.compare"
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run")
    ap.add_argument("--before", required=True, type=Path, help="a tree to compare with (an exported copy of main)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threshold", type=float, default=0.0, help="gammaThreshold (> 0: every level built first)")
    args = ap.parse_args()
    before = module_of(args.before)
    run = open_run(args.run)
    cfg = run.tree
    pieces = []
    for load in run.chunks(1):
        for b in load()[0]:
            res = replay_batch(b, cfg, 1)
            for shape, _, bb, rr in replayed_by_shape(b, res):
                pieces.append((bb, rr, expanded_nodes(rr, shape), shape))
    print(f"{len(pieces)} pieces, {sum(len(p[0]) for p in pieces)} rounds", flush=True)

    def go(mod, subs):
        return [mod.replay_contained_many(b, r, e, s, subs, cfg.gamma, args.threshold) for b, r, e, s in pieces]

    for name, texts in CONFIGS.items():
        subs = [parse_config_text(t) for t in texts]
        for a, b in zip(go(before, subs), go(this, subs)):
            for oa, ob in zip(a, b):
                for f in oa.__dataclass_fields__:
                    assert np.array_equal(getattr(oa, f), getattr(ob, f)), (name, f)
        times: dict[str, list[float]] = {"before": [], "this": []}
        for k in range(args.repeats):
            order = [("before", before), ("this", this)]
            for label, mod in order if k % 2 == 0 else order[::-1]:
                t = time.process_time()
                go(mod, subs)
                times[label].append(round(time.process_time() - t, 2))
        print(f"{name} configs (outcomes equal): CPU s before {times['before']}, this {times['this']}", flush=True)


if __name__ == "__main__":
    main()
