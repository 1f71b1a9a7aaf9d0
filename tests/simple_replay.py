"""A deliberately simple second implementation of tree rebuild + greedy acceptance.

Nodes are tuples of draft ranks from the root (the root is ``()``), kept in dicts; no numpy,
no shared code with replay/ but the tie rule of equal path probabilities, which every oracle takes
from replay.testing.selection_ref (one copy: tests/test_tie_rule_once.py). Property tests check
that replay/ agrees with it on random dumps.
"""

from __future__ import annotations

from replay.testing.selection_ref import select_ref


def simple_replay(steps, validate, top_k_spec, top_head, logp=None, parents=None, layout="all"):
    """steps[i]: rows of token ids; logp[i]: rows of log-probs or None; parents[i]: node ids or None.

    Returns (accepted node ids in tree order, accepted tokens, bonus token or None, bonus kind or
    None, stop reason), the kinds and reasons spelled as docs/vocabulary.md defines them.
    """
    order = [()]  # tree order
    token = {(): -1}
    path_lp = {(): 0.0}
    known_lp = True
    level = [()]
    prev_chosen = [()]
    expanded_in_order = []
    for i, rows in enumerate(steps):
        heads = top_head[i]
        if i == 0:
            chosen = [()]
        elif parents is not None and parents[i] is not None:
            chosen = [order[p] for p in parents[i][:heads]]
        elif known_lp:
            chosen = [level[j] for j in select_ref([path_lp[n] for n in level], heads)]  # level: tree order
        else:
            chosen = sorted(level, key=lambda n: (n[-1], prev_chosen.index(n[:-1])))[:heads]  # no ties
        if logp is None or logp[i] is None:
            known_lp = False
        new_level = []
        for j, node in enumerate(chosen):
            expanded_in_order.append(node)
            for r in range(top_k_spec[i][j]):
                child = node + (r,)
                order.append(child)
                token[child] = rows[j][r]
                if known_lp:
                    path_lp[child] = path_lp[node] + logp[i][j][r]
                new_level.append(child)
        prev_chosen = chosen
        level = new_level
    if layout == "all":
        row_of = {node: k for k, node in enumerate(order)}
    else:
        row_of = {node: k for k, node in enumerate(expanded_in_order)}
    cur = ()
    accepted = []
    while True:
        kids = [n for n in order if len(n) == len(cur) + 1 and n[:-1] == cur]
        nodes, tokens = [order.index(n) for n in accepted], [token[n] for n in accepted]
        if cur not in row_of:
            return nodes, tokens, None, None, ("no_target_row" if kids else "leaf")
        want = validate[row_of[cur]][0]
        match = [k for k in kids if token[k] == want]
        if not match:
            if kids:
                return nodes, tokens, want, "correction", "mismatch"
            return nodes, tokens, want, "leaf_bonus", "leaf"
        cur = match[0]
        accepted.append(cur)
