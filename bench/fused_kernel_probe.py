"""Would a compiled kernel reach 1 M rounds/s for batch_sampling? A feasibility probe (issue 20).

    pip install numba                    # not a dependency of specreplay: this probe alone needs it
    python bench/fused_kernel_probe.py   # 10^5 article rounds, 7 interleaved repeats, CPU time

The probe times numba kernels that do the *work* of the rule at one T on the batch arrays (the row
gathers, each row's max/min/Σexp(l)/Σexp(a(l − lmax)), the first-match child lookup, the edge
probabilities and the walk's E[L], P(L ≥ d) and second moment) against the real ``batch_sampling``
and the greedy ``replay_batch`` in the same process. The kernels are **work-alikes, not the rule**:
their tail bounds are simplified and they skip the problem codes, the vocabulary bound and the
repeats, so their numbers are not specreplay's (they print how far they are from it). What they
answer is whether the same arithmetic, fused and compiled, runs faster than the numpy rule.

Three variants: ``fused`` (one loop per chunk of rounds, numba's scalar exp), ``hybrid`` (numba
gathers the rows and walks the tree, numpy's vectorised exp in between), and the hybrid's three
parts alone. docs/benchmarks.md ("A compiled kernel?") records a run and what it shows.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

import numpy as np

try:
    import numba as nb
except ImportError:
    sys.exit("bench/fused_kernel_probe.py needs numba (pip install numba); specreplay itself does not")

from benchkit import machine_line  # bench/benchkit.py

from replay.core.config import TreeConfig
from replay.engine.batch import replay_batch
from replay.engine.batch.sampling import _shape_chunks, batch_sampling, shape_inputs, shape_layout
from replay.testing.batch_synth import SynthSpec, synth_batch
from replay.testing.sampling_ref import with_validate_scores

ARTICLE = TreeConfig.from_lists([[6], [2, 2], [1, 1]], [1, 2, 2])
ROUNDS, REPEATS, T, VOCAB, CHUNK = 100_000, 7, 0.7, 150_000, 2048


@nb.njit(boundscheck=False)
def _row_terms(lp, mx, mn, s1, sa, a):  # lp [K] float64 -> the row's four statistics
    hi, lo = -np.inf, np.inf
    for k in range(lp.shape[0]):
        hi, lo = max(hi, lp[k]), min(lo, lp[k])
    t1 = ta = 0.0
    for k in range(lp.shape[0]):
        t1 += np.exp(lp[k])
        ta += np.exp(a * (lp[k] - hi))
    return hi, lo, t1, ta


@nb.njit(boundscheck=False)
def _walk_round(q_at, ids_at, zlo, zhi, tail, lmax, tokens, rn, edge_row, depths, a, r, out, rlo, rhi):
    # out: (E_lo [R], E_hi [R], ge_lo [R, G+1], ge_hi [R, G+1], second moment [R])
    e_lo, e_hi, ge_lo, ge_hi, m2 = out
    rlo[0] = rhi[0] = 1.0
    ge_lo[r, :] = 0.0
    ge_hi[r, :] = 0.0
    for u in range(1, edge_row.shape[0] + 1):
        e = edge_row[u - 1]
        cell = -1
        for k in range(ids_at.shape[1]):
            if ids_at[e, k] == tokens[u, r]:
                cell = k
                break
        if cell >= 0:
            w = q_at[e, cell]
            p_lo, p_hi = w / zhi[e], w / zlo[e]
        else:
            p_lo, p_hi = 0.0, min(1.0, tail[e] ** a * np.exp(-a * lmax[e]) / zlo[e])
        rlo[u], rhi[u] = rlo[rn[e, r]] * p_lo, rhi[rn[e, r]] * p_hi
        e_lo[r] += rlo[u]
        e_hi[r] += rhi[u]
        ge_lo[r, depths[u]] += rlo[u]
        ge_hi[r, depths[u]] += rhi[u]
        m2[r] += rlo[u] * (2 * depths[u] - 1)


@nb.njit(boundscheck=False)
def fused(vids, vlp, tokens, rn, vrow, edge_row, depths, a, out):
    n_rows, k = rn.shape[0], vids.shape[1]
    lp, ids_at, q_at = np.empty(k), np.empty((n_rows, k), vids.dtype), np.empty((n_rows, k))
    zlo, zhi, tail, lmax = np.empty(n_rows), np.empty(n_rows), np.empty(n_rows), np.empty(n_rows)
    rlo, rhi = np.empty(edge_row.shape[0] + 1), np.empty(edge_row.shape[0] + 1)
    for r in range(vids.shape[2]):
        for e in range(n_rows):
            row = vrow[e, r]
            for c in range(k):
                lp[c], ids_at[e, c] = vlp[row, c, r], vids[row, c, r]
            hi, lo, t1, ta = _row_terms(lp, 0.0, 0.0, 0.0, 0.0, a)
            for c in range(k):
                q_at[e, c] = np.exp(a * (lp[c] - hi))
            mass, q_min = max(0.0, 1.0 - t1), np.exp(lo)
            lmax[e], zlo[e], tail[e] = hi, ta, min(q_min, mass)
            zhi[e] = ta + mass * q_min ** (a - 1.0) * np.exp(-a * hi)
        _walk_round(q_at, ids_at, zlo, zhi, tail, lmax, tokens, rn, edge_row, depths, a, r, out, rlo, rhi)


@nb.njit(boundscheck=False)
def gather(vids, vlp, vrow, lo, hi, lp, ids, mx, mn):  # -> lp, ids [E, K, C]; mx, mn [E, C]
    for e in range(vrow.shape[0]):
        for j in range(hi - lo):
            row, top, low = vrow[e, lo + j], -np.inf, np.inf
            for c in range(vids.shape[1]):
                x = np.float64(vlp[row, c, lo + j])
                lp[e, c, j], ids[e, c, j] = x, vids[row, c, lo + j]
                top, low = max(top, x), min(low, x)
            mx[e, j], mn[e, j] = top, low


@nb.njit(boundscheck=False)
def finish(q, qa, ids, mx, mn, tokens, rn, edge_row, depths, a, lo, hi, out):
    n_rows, k = q.shape[0], q.shape[1]
    zlo, zhi, tail, lmax = np.empty(n_rows), np.empty(n_rows), np.empty(n_rows), np.empty(n_rows)
    rlo, rhi = np.empty(edge_row.shape[0] + 1), np.empty(edge_row.shape[0] + 1)
    for j in range(hi - lo):
        for e in range(n_rows):
            t1 = ta = 0.0
            for c in range(k):
                t1 += q[e, c, j]
                ta += qa[e, c, j]
            mass, q_min = max(0.0, 1.0 - t1), np.exp(mn[e, j])
            lmax[e], zlo[e], tail[e] = mx[e, j], ta, min(q_min, mass)
            zhi[e] = ta + mass * q_min ** (a - 1.0) * np.exp(-a * mx[e, j])
        _walk_round(
            qa[:, :, j], ids[:, :, j], zlo, zhi, tail, lmax, tokens, rn, edge_row, depths, a, lo + j, out, rlo, rhi
        )


def main() -> None:
    batch = with_validate_scores(synth_batch(SynthSpec(ARTICLE, ROUNDS, target_cols=16, vocab=50_000)), 0, 50_000)
    res = replay_batch(batch, ARTICLE, workers=1)
    shape = res.shapes[0]
    inputs, tree = shape_inputs(batch, shape, True, res.layout == 1), shape_layout(shape)
    v, a, g = batch.validate, 1.0 / T, int(tree.depths.max())
    rn = np.zeros((tree.num_rows, ROUNDS), np.int64)  # [E, R] int64: each row's node
    for e, node in enumerate(inputs.row_node):
        rn[e] = node
    vrow = np.where((res.layout == 1)[None, :], rn, np.arange(tree.num_rows)[:, None])  # [E, R]: its validate row
    args = (inputs.tokens, rn, tree.edge_row, tree.depths, a)
    k, n_rows = v.ids.shape[1], tree.num_rows
    bufs = {n: np.empty((n_rows, k, CHUNK)) for n in ("lp", "q", "qa")}
    ids = np.empty((n_rows, k, CHUNK), v.ids.dtype)
    mx, mn = np.empty((n_rows, CHUNK)), np.empty((n_rows, CHUNK))

    def outputs():
        return (
            np.zeros(ROUNDS),
            np.zeros(ROUNDS),
            np.zeros((ROUNDS, g + 1)),
            np.zeros((ROUNDS, g + 1)),
            np.zeros(ROUNDS),
        )

    def run_fused():
        out = outputs()
        fused(v.ids, v.logp, inputs.tokens, rn, vrow, tree.edge_row, tree.depths, a, out)
        return out

    def run_hybrid(parts=(True, True, True)):
        out = outputs()
        for lo in range(0, ROUNDS, CHUNK):
            hi = min(lo + CHUNK, ROUNDS)
            c = hi - lo
            lp, q, qa = (bufs[n][..., :c] for n in ("lp", "q", "qa"))
            if parts[0]:
                gather(v.ids, v.logp, vrow, lo, hi, bufs["lp"], ids, mx, mn)
            if parts[1]:
                np.exp(lp, out=q)
                np.subtract(lp, mx[:, None, :c], out=qa)
                qa *= a
                np.exp(qa, out=qa)
            if parts[2]:
                finish(q, qa, ids, mx, mn, *args[:4], a, lo, hi, out)
        return out

    def rebuild_only():
        for _ in _shape_chunks(batch, shape, True, res.layout == 1):
            pass

    ref = batch_sampling(batch, res, ARTICLE, T, VOCAB)
    for name, out in (("fused", run_fused()), ("hybrid", run_hybrid())):
        print(f"{name}: max |E_lo - batch_sampling's| {np.nanmax(np.abs(out[0] - ref.expected_lo)):.3g} (a work-alike)")
    jobs = {
        "greedy replay_batch": lambda: replay_batch(batch, ARTICLE, workers=1),
        f"batch_sampling T={T:g} (numpy, the rule)": lambda: batch_sampling(batch, res, ARTICLE, T, VOCAB),
        "numba fused, scalar exp": run_fused,
        "hybrid: numba gather + numpy exp + numba walk": run_hybrid,
        "hybrid, numba gather alone": lambda: run_hybrid((True, False, False)),
        "hybrid, numpy's 2 exps alone": lambda: run_hybrid((False, True, False)),
        "hybrid, numba walk alone": lambda: run_hybrid((False, False, True)),
        "batch_sampling's chunk rebuild + row reads alone": rebuild_only,
    }
    for fn in jobs.values():  # warm-up (the numba kernels compile on their first call)
        fn()
    times: dict[str, list[float]] = {name: [] for name in jobs}
    load = os.getloadavg()[0]
    for _ in range(REPEATS):
        for name, fn in jobs.items():
            start = time.process_time()
            fn()
            times[name].append(time.process_time() - start)
    print(machine_line() + f", numba {nb.__version__}, load average {load:.1f} .. {os.getloadavg()[0]:.1f}")
    print(f"{ROUNDS} article rounds, T = {T:g}, one thread, {REPEATS} interleaved repeats, CPU time\n")
    print("| what | M rounds/s (median) | spread | time / greedy | µs a round |")
    print("|---|---|---|---|---|")
    greedy = statistics.median(times["greedy replay_batch"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(
            f"| {name} | {ROUNDS / med / 1e6:.2f} | {ROUNDS / max(ts) / 1e6:.2f}..{ROUNDS / min(ts) / 1e6:.2f} "
            f"| {med / greedy:.2f} | {med / ROUNDS * 1e6:.3f} |"
        )


if __name__ == "__main__":
    main()
