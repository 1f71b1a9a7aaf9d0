"""The per-round reference replay: rebuild the tree, read the target's choices, walk greedy acceptance.

``replay_round`` is the readable reference (one round at a time); ``replay_directory`` and
``replay_packed`` apply it to a dump directory or a packed run, analysing every valid round and
listing what they skipped and why. Tests hold the batch engine (replay.engine.batch, which every
command runs on) equal to these; no run-time module calls them (tests/test_layers.py). The
options and the run's stderr lines come from the same modules as the batch path's
(replay.engine.options, replay.engine.run_notes).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from replay.core.acceptance import Acceptance, accept_greedy, target_top1_per_node
from replay.core.config import SpecConfig, TreeConfig
from replay.core.records import shape_text
from replay.core.selection import FALLBACK_WARNING, fallback_run_warning, unused_scores_note
from replay.core.tree import Tree
from replay.core.vocab import (
    LAYOUT_ALL,
    LAYOUT_PARENTS,
    PAD_TOKEN,
    SELECT_PARENTS,
    SELECT_PATH_PROB,
    first_not_token_id,
    not_token_ids,
)
from replay.engine.batch.rejections import (
    column0_words,
    fewer_rows_words,
    lost_step_words,
    negative_words,
    no_layout_words,
    other_layout_words,
    rows_of_all_words,
    unexplained_rows_message,
)
from replay.engine.batch.rising import rising_rows_words
from replay.engine.options import ReplayOptions, open_packed, packed_keys, resolve_options
from replay.engine.run_notes import input_warnings, reading_warnings, round_notes_lines, run_layout
from replay.io.dumpnames import Key
from replay.io.grouping import Grouping
from replay.io.manifest import Manifest, group_rounds, recorded_round_warnings
from replay.io.packed.format import looks_packed
from replay.io.rounds import Round, load_round
from replay.io.skipfold import listed_once, misspelt_companion, no_such_round
from replay.io.skipped import Skipped
from replay.io.step0 import Step0Check
from replay.testing.packed_rounds import packed_rounds
from replay.testing.rebuild import Rebuilt, rebuild_tree
from replay.testing.records_reference import RoundRecord
from replay.util.errors import DumpError, RoundError, RoundNotFoundError, SpecReplayError
from replay.util.words import row_words


@dataclass(frozen=True, eq=False)
class RoundResult:
    key: Key
    rebuilt: Rebuilt
    acceptance: Acceptance
    layout: str  # "parents" or "all"
    layout_source: str  # "stated" or "detected"
    target_top1: np.ndarray  # [num_nodes + 1] int64, PAD_TOKEN where the dump has no row
    validate_rows: int  # rows of the validate matrix used (excess rows are padding)
    notes: tuple[str, ...] = ()
    validate_ids: np.ndarray | None = None  # [validate_rows, cols] the rows used (sampling mode reads them)
    validate_logp: np.ndarray | None = None  # [validate_rows, cols] their log-probs, None without scores
    # [num_nodes + 1, T] each node's log-prob under its parent (validate node_logprobs, layout all only)
    node_logp: np.ndarray | None = None
    scores_path: str = ""  # the validate scores' file (messages about a row name it)
    validate_path: str = ""  # the validate file (messages about its node_logprobs name it)
    # the validate file has node_logprobs, unused: in the parents layout row n is not tree node n
    node_logp_unused: bool = False
    # (draft rows, among those the steps expand, whose scores rise along the row; the first's "file, row k")
    draft_rising: tuple[int, str] = (0, "")

    @property
    def tree(self) -> Tree:
        return self.rebuilt.tree

    @property
    def name(self) -> str:
        return f"{self.key[0]}_{self.key[1]}"

    def to_json(self) -> dict:
        """The round's record (records_reference.RoundRecord) as a JSON object (docs/output-schema.md)."""
        return record_of(self).to_json()


def _trailing_pad_rows(ids: np.ndarray) -> int:
    """Rows left after dropping trailing rows made only of PAD_TOKEN."""
    pad = np.all(ids == PAD_TOKEN, axis=1)
    n = ids.shape[0]
    while n and pad[n - 1]:
        n -= 1
    return n


def resolve_layout(
    key: Key, tree: Tree, validate_ids: np.ndarray, stated: str | None, path: str, config: str
) -> tuple[str, str, int]:
    """(layout, "stated"|"detected", rows to use). validate_ids: [rows, cols] int64; config: the
    config's label, for messages. Rows beyond the layout's that are not padding skip the round."""
    n_parents = int(tree.expanded_order.shape[0])
    n_all = tree.num_nodes + 1
    rows = _trailing_pad_rows(validate_ids)
    if stated is not None:
        need = n_parents if stated == LAYOUT_PARENTS else n_all
        if rows < need:
            raise RoundError(key, fewer_rows_words(rows, stated, need), path)
        if stated == LAYOUT_PARENTS and rows >= n_all:
            raise RoundError(key, rows_of_all_words(rows, n_all, need), path)
        if rows > need:
            raise RoundError(key, unexplained_rows_message(rows, stated, need, config), path)
        return stated, "stated", need
    if rows == n_parents:
        return LAYOUT_PARENTS, "detected", n_parents
    if rows == n_all:
        return LAYOUT_ALL, "detected", n_all
    if rows > n_all:
        raise RoundError(key, unexplained_rows_message(rows, LAYOUT_ALL, n_all, config), path)
    raise RoundError(key, no_layout_words(rows, n_parents, tree.num_nodes), path)


def _check_no_lost_step(rnd: Round, cfg: TreeConfig, tree: Tree, rows: int) -> None:
    """An all-layout validate with exactly the rows of a deeper tree proves that draft files are
    missing: replayed with the steps left, the round would pass as one that stopped early."""
    steps = tree.num_steps
    deeper = cfg.all_rows_of_deeper_trees(steps)
    if rows in deeper:
        more = deeper.index(rows) + 1
        raise RoundError(rnd.key, lost_step_words(rows, steps + more, steps, rnd.key), rnd.validate.path)


def _rising_rows_warnings(results: list[RoundResult]) -> tuple[str, ...]:
    """The run's lines about validate rows, then draft rows, whose scores rise along the row
    (docs/dump-format.md writes them in descending probability; equal neighbours do not rise).
    Numbers stay as they are: the greedy replay reads validate column 0 as the top-1 (as the format
    says), the sampling bounds each row's smallest p (any order), the draft ranks the column order."""
    count, first = 0, None
    for r in results:
        rows = _rising_row_numbers(r.validate_ids, r.validate_logp)
        if rows and first is None:
            first = f"{r.scores_path}, {row_words(rows[0])}"
        count += len(rows)
    lines = () if not count or first is None else (rising_rows_words("validate", count, first),)
    drafts = [r.draft_rising for r in results if r.draft_rising[0]]
    if drafts:
        lines += (rising_rows_words("draft", sum(n for n, _ in drafts), drafts[0][1]),)
    return lines


def _rising_row_numbers(ids: np.ndarray | None, logp: np.ndarray | None) -> list[int]:
    """The rows (ids, logp: [rows, cols]) whose scores rise between two real cells."""
    if ids is None or logp is None or logp.shape[1] < 2:
        return []
    real = ids != PAD_TOKEN
    up = (logp[:, 1:] > logp[:, :-1]) & real[:, 1:] & real[:, :-1]  # no difference: -inf - -inf warns
    return [int(k) for k in np.flatnonzero(up.any(axis=1))]


def _draft_rising(rnd: Round, tree: Tree) -> tuple[int, str]:
    """(the round's draft rows that its steps expand whose scores rise, "scores file, row k" of the
    first, step by step; "" when none)."""
    count, first = 0, ""
    for mat, chosen in zip(rnd.steps, tree.expanded):
        n = int(chosen.shape[0])
        rows = _rising_row_numbers(mat.ids[:n], None if mat.logp is None else mat.logp[:n])
        if rows and not first:
            first = f"{mat.scores_path or mat.path}, {row_words(rows[0])}"
        count += len(rows)
    return count, first


def replay_round(rnd: Round, cfg: TreeConfig) -> RoundResult:
    """The reference replay of one round; raises RoundError when the dump disagrees with cfg."""
    rebuilt = rebuild_tree(rnd, cfg)
    tree = rebuilt.tree
    if rnd.layout != LAYOUT_PARENTS:  # a lost step explains rows beyond the layout better than a wrong config
        _check_no_lost_step(rnd, cfg, tree, _trailing_pad_rows(rnd.validate.ids))
    layout, source, rows = resolve_layout(rnd.key, tree, rnd.validate.ids, rnd.layout, rnd.validate.path, cfg.short())
    used = rnd.validate.ids[:rows]
    fault = (used[:, 0] < 0) | not_token_ids(used).any(axis=1)  # column 0 holds no token, or any column a negative id
    if fault.any():
        bad = int(np.flatnonzero(fault)[0])
        padded = used[bad, 0] == PAD_TOKEN
        words = column0_words(bad) if padded else negative_words("validate", bad, *first_not_token_id(used[bad]))
        raise RoundError(rnd.key, words, rnd.validate.path)
    top1 = target_top1_per_node(tree, rnd.validate.ids[:rows], layout)
    acc = accept_greedy(tree, top1)
    notes = list(rebuilt.notes)
    if rnd.validate.ids.shape[0] > rows:
        notes.append(
            f"validate: {rnd.validate.ids.shape[0] - rows} row(s) beyond the {layout} layout ignored as padding"
        )
    logp = None if rnd.validate.logp is None else rnd.validate.logp[:rows]
    own = rnd.validate.node_logp
    unused = own is not None and layout != LAYOUT_ALL
    own = None if unused or own is None else own[:rows]  # row u is node u only in layout all
    return RoundResult(
        rnd.key,
        rebuilt,
        acc,
        layout,
        source,
        top1,
        rows,
        tuple(notes),
        rnd.validate.ids[:rows],
        logp,
        own,
        rnd.validate.scores_path or rnd.validate.path,
        rnd.validate.path,
        unused,
        _draft_rising(rnd, tree),
    )


@dataclass(frozen=True, eq=False)
class DirectoryReplay:
    directory: str
    config: SpecConfig
    tree: TreeConfig
    manifest: Manifest
    results: tuple[RoundResult, ...]
    skipped: tuple[Skipped, ...]  # rounds or files that could not be used, with reasons
    config_source: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = ()  # lines for stderr about how the files were read (Step0Check.after_replay)


def iter_rounds(
    directory: Path, grouping: Grouping, opts: ReplayOptions, manifest: Manifest, skipped: list[Skipped]
) -> Iterator[Round]:
    """Load rounds one by one; a round whose files cannot be read is recorded in ``skipped``."""
    for files in grouping.rounds:
        if opts.only_round is not None and files.key != opts.only_round:
            continue
        try:
            yield load_round(
                files,
                opts.raw,
                opts.score_kind or "auto",
                manifest.root_tokens.get(files.key, PAD_TOKEN),
                opts.layout,
            )
        except DumpError as exc:
            skipped.append(Skipped(f"round {files.key[0]}_{files.key[1]}", skip_reason(exc), (exc.path,)))


def replay_directory(
    directory: str | Path,
    opts: ReplayOptions = ReplayOptions(),
    progress: Callable[[int, int], None] | None = None,
) -> DirectoryReplay:
    """Replay every round of a dump directory; bad rounds are listed in ``skipped``, never fatal.

    A packed run (a directory holding packed.json, see ``specreplay pack``) replays identically;
    one that lost packed.json is an error, never an empty dump directory.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise DumpError(directory, "not a directory")
    if looks_packed(directory):
        return replay_packed(directory, opts, progress)
    asked, given_kind = opts.step0_offset, opts.score_kind
    config, tree_cfg, manifest, opts, source = resolve_options(directory, opts)
    grouping = group_rounds(directory, asked, manifest, tree_cfg.gamma)
    opts = replace(opts, step0_offset=grouping.step0_offset)
    skipped = list(grouping.skipped)
    results: list[RoundResult] = []
    total = len(grouping.rounds)
    at: list[int] = []  # where each result's round stands among the skipped ones
    for k, rnd in enumerate(iter_rounds(directory, grouping, opts, manifest, skipped)):
        try:
            results.append(replay_round(rnd, tree_cfg))
            at.append(len(skipped))
        except SpecReplayError as exc:
            skipped.append(_rejected(f"round {rnd.name}", exc, grouping.skipped))
        if progress:
            progress(k + 1, total)
    if opts.only_round is not None and not results and not any(opts.only_round == f.key for f in grouping.rounds):
        raise RoundNotFoundError(
            directory,
            no_such_round(opts.only_round, [f.key for f in grouping.rounds], str(directory), grouping.skipped),
        )
    results = _one_layout(results, skipped, at)
    skipped = list(listed_once(grouping.skipped, skipped[len(grouping.skipped) :]))
    warnings = input_warnings(config, manifest, directory, source, opts.tree_index) + _run_warnings(
        grouping.step0, manifest, tree_cfg, results, opts, given_kind is not None
    )
    return DirectoryReplay(
        str(directory),
        config,
        tree_cfg,
        manifest,
        tuple(results),
        tuple(skipped),
        source,
        (),
        warnings,
    )


def skip_reason(exc: BaseException) -> str:
    """The reason a round was skipped, for a Skipped entry that names the round itself: a RoundError's
    reason (its message without the round's name), any other error's message."""
    return getattr(exc, "reason", None) or str(exc)


def _rejected(what: str, exc: SpecReplayError, files: Sequence[Skipped]) -> Skipped:
    """The entry of a round the reference refused, a misspelt companion among the grouping's ``files``
    named in it (replay.io.skipfold.misspelt_companion) when the round lost that companion."""
    path = getattr(exc, "path", None) or ""
    entry = Skipped(what, skip_reason(exc), (path,))
    kind = getattr(exc, "lost_companion", None)
    return entry if kind is None else misspelt_companion(entry, path, kind, files)


def _one_layout(results: list[RoundResult], skipped: list[Skipped], at: list[int]) -> list[RoundResult]:
    """The results of the run's one layout (replay.engine.run_notes.run_layout, from the rounds whose
    layout was detected); a round of the other is skipped, inserted among ``skipped`` where it stands
    (at[k]: how many were skipped before results[k])."""
    detected = [r for r in results if r.layout_source == "detected"]
    layout = run_layout(sum(r.layout == LAYOUT_ALL for r in detected), len(detected))
    if layout is None:
        return results
    kept = []
    for k in reversed(range(len(results))):
        r = results[k]
        if r.layout_source == "stated" or r.layout == layout:
            kept.append(r)
            continue
        n_parents = int(r.tree.expanded_order.shape[0])
        words = other_layout_words(r.validate_rows, n_parents, r.tree.num_nodes + 1)
        skipped.insert(
            at[k],
            Skipped(f"round {r.name}", skip_reason(RoundError(r.key, words, r.validate_path)), (r.validate_path,)),
        )
    return kept[::-1]


def _run_warnings(
    step0: Step0Check,
    manifest: Manifest,
    tree_cfg: TreeConfig,
    results: list[RoundResult],
    opts: ReplayOptions,
    by_option: bool,
) -> tuple[str, ...]:
    """The stderr lines of a reference replay, from a directory or a packed run alike: how the
    files were read, the rank-major fallback, rising scores, the manifest's recorded figures."""
    warnings = reading_warnings(step0, [r.acceptance.accepted_length for r in results])
    guessed = [r.name for r in results if FALLBACK_WARNING in r.notes]
    informed = any(s in (SELECT_PATH_PROB, SELECT_PARENTS) for r in results for s in r.rebuilt.selection)
    fallback = fallback_run_warning(len(guessed), len(results), guessed[:3], informed)
    warnings += (fallback,) if fallback else ()
    scored = sum(r.validate_logp is not None or r.rebuilt.candidate_logp is not None for r in results)
    unused = unused_scores_note(opts.score_kind, by_option, scored, len(results))
    warnings += (unused,) if unused else ()
    warnings += round_notes_lines((r.name, r.notes, 1) for r in results)
    warnings += _rising_rows_warnings(results)
    warnings += recorded_round_warnings(
        manifest,
        tree_cfg,
        ([r.key[0] for r in results], [r.key[1] for r in results]),
        {
            "num_nodes": [r.tree.num_nodes for r in results],
            "draft_steps": [r.tree.num_steps for r in results],
            "accepted_length": [r.acceptance.accepted_length for r in results],
        },
    )
    return warnings


def replay_packed(
    path: str | Path, opts: ReplayOptions = ReplayOptions(), progress: Callable[[int, int], None] | None = None
) -> DirectoryReplay:
    """replay_directory for a packed run: the reference, round by round, identical results."""
    path = Path(path)
    if not path.is_dir():
        raise DumpError(path, "not a directory (expected a dump directory or a packed run)")
    given_kind = opts.score_kind
    packed, config, tree, manifest, opts, source = open_packed(path, opts)
    skipped = list(packed.skipped)
    results: list[RoundResult] = []
    only = opts.only_round
    seen = loaded = 0
    at: list[int] = []  # where each result's round stands among the skipped ones
    for _, item in packed_rounds(packed, opts.layout, only):
        seen += 1
        if isinstance(item, Skipped):
            skipped.append(item)
            continue
        try:
            results.append(replay_round(item, tree))
            at.append(len(skipped))
        except SpecReplayError as exc:
            skipped.append(packed.entry(_rejected(f"round {item.name}", exc, packed.skipped)))
        loaded += 1
        if progress:
            progress(loaded, packed.num_rounds)
    if only is not None and not seen:
        raise RoundNotFoundError(path, no_such_round(only, packed_keys(packed), str(path), packed.skipped))
    results = _one_layout(results, skipped, at)
    skipped = list(listed_once(packed.skipped, skipped[len(packed.skipped) :]))
    warnings = input_warnings(config, manifest, path, source, opts.tree_index) + _run_warnings(
        packed.step0, manifest, tree, results, opts, given_kind is not None
    )
    return DirectoryReplay(
        str(path),
        config,
        tree,
        manifest,
        tuple(results),
        tuple(skipped),
        source,
        (),
        warnings,
    )


def record_of(res: RoundResult) -> RoundRecord:
    """The record of one reference replay."""
    a, tree = res.acceptance, res.tree
    _, widths = tree.shape()
    root = int(tree.tokens[0])
    return RoundRecord(
        res.name,
        int(res.key[0]),
        int(res.key[1]),
        None if root == PAD_TOKEN else root,
        tree.num_steps,
        tree.num_nodes,
        shape_text(widths),
        res.layout,
        res.layout_source,
        res.rebuilt.selection_summary,
        a.accepted_length,
        tuple(int(t) for t in a.accepted_tokens),
        tuple(int(u) for u in a.accepted_nodes),
        a.bonus_token,
        a.bonus_kind,
        a.stop,
        tuple(int(t) for t in a.committed_tokens),
        len(a.committed_tokens),
        tuple(res.notes),
    )
