"""Check a command's output (and input file) paths before any work starts (the rules users see:
docs/cli.md, "Output paths").

A missing parent is an error rather than made: a typo in it (``-o /nonexistent/dir/rounds.parquet``)
would otherwise make ``/nonexistent/dir`` at the filesystem root and report success. "Writable" is
tried for real (a temporary entry made and removed): permission bits alone say nothing to root, and
/proc or a read-only mount refuse entries whatever the bits say. The commands declare their outputs
with the argparse types ``output_dir`` (or an ``OutputDir`` of their own) / ``output_file``, so a bad
path fails while parsing, with the option's name, before a dump is read or a model loaded. Input
files read only after a slow step (a prompts file after loading two models) are declared with
``input_file`` for the same reason.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from .atomic import replaced_file, writes_in_place
from .errors import InputPathError, OutputPathError

DIRECTORY, FILE = "directory", "file"
# A new directory output whose name ends in a common file type's suffix is a mistake: the user meant
# a file. The list is of file types, not a pattern, so that dotted directory names (results.final,
# qwen2.5.coder, out.d, run.v2, a packed run's DUMP.run) stay directory names; an existing directory
# is taken whatever its name.
FILE_SUFFIXES = frozenset(
    # what the commands write or read
    {".json", ".jsonl", ".csv", ".parquet", ".html", ".png", ".svg", ".pdf", ".txt", ".npz", ".npy", ".pt"}
    # other tables, images, documents and archives a user may think an output is
    | {".tsv", ".xlsx", ".xls", ".ods", ".feather", ".arrow", ".h5", ".hdf5", ".pkl", ".htm", ".md", ".log"}
    | {".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp", ".eps", ".ps"}
    | {".zip", ".gz", ".tgz", ".bz2", ".xz", ".zst", ".7z", ".tar", ".yaml", ".yml", ".toml", ".xml"}
)


def names_a_file(path: Path) -> bool:
    """Whether ``path``'s name ends in a file type's suffix (FILE_SUFFIXES, in any case)."""
    return path.suffix.lower() in FILE_SUFFIXES


def check_output(path: str | Path, kind: str, writes: str = "its files into {dir}/", prints: bool = False) -> Path:
    """``path`` if it can be written as a ``kind`` (DIRECTORY or FILE), else OutputPathError.
    ``writes`` and ``prints``: what a directory output's command writes there and whether it prints
    its results too (OutputDir), for the advice when a new directory is named like a file."""
    if kind not in (DIRECTORY, FILE):
        raise ValueError(f"kind must be {DIRECTORY!r} or {FILE!r}, got {kind!r}")
    if not str(path).strip():
        raise OutputPathError("empty path")
    p = Path(path)
    if kind == DIRECTORY:
        # A trailing slash says "a directory" whatever the name ends in.
        if not p.exists() and names_a_file(p) and not str(path).endswith(("/", os.sep)):
            d = p.with_suffix("")
            redirect = f"; to keep the printed output in a file, redirect stdout (> {p.name})" if prints else ""
            raise OutputPathError(
                f"{p}: names a new directory but ends in {p.suffix} like a file: this option takes a directory"
                f" (give a name such as {d}/: it writes {writes.format(dir=d)}; or {p}/ to keep this name)"
                f"{redirect}"
            )
        _check_directory(p, p)
    else:
        if p.is_dir():
            raise OutputPathError(f"{p}: is a directory; expected a file name")
        if p.exists() and not os.access(p, os.W_OK):
            raise OutputPathError(f"{p}: the file exists and is not writable")
        if p.exists() and writes_in_place(p):
            return p  # a device or /dev/stdout: written into, nothing is created beside it
        _check_directory(replaced_file(p).parent, p)
    return p


def _check_directory(d: Path, target: Path) -> None:
    """``d`` is, or can become, a directory we may write into; messages name ``target``."""
    if d.exists():
        if not d.is_dir():
            what = "exists and is not a directory" if d == target else f"{d} is not a directory"
            raise OutputPathError(f"{target}: {what}")
        if not os.access(d, os.W_OK | os.X_OK):
            raise OutputPathError(f"{target}: {_why_unwritable(d)}")
        _try_making(d, target, FILE)  # the command writes files into d
        return
    ancestor = _nearest_existing(d)
    if not ancestor.is_dir():
        raise OutputPathError(f"{target}: cannot be created: {ancestor} is not a directory")
    # Only a directory output's own directory is made, never a parent, nor a file output's directory.
    missing = d if d != target else d.parent
    if d != target or ancestor != Path(os.path.abspath(missing)):
        raise OutputPathError(f"{target}: directory {missing} does not exist (create it first)")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise OutputPathError(f"{target}: cannot be created: {_why_unwritable(ancestor)}")
    _try_making(ancestor, target, DIRECTORY)


def _why_unwritable(d: Path) -> str:
    """Why ``d``, which os.access found unwritable, refuses new files: a read-only file system
    refuses everyone, whatever the permissions say."""
    try:
        read_only = bool(os.statvfs(d).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return f"{d} is on a read-only file system" if read_only else f"no permission to write in {d}"


def _try_making(d: Path, target: Path, kind: str) -> None:
    """Make and remove a temporary ``kind`` in ``d``, as the write will; OutputPathError naming
    ``target`` when ``d`` refuses it."""
    try:
        if kind == DIRECTORY:
            os.rmdir(tempfile.mkdtemp(prefix=".specreplay-check.", dir=d))
        else:
            fd, made = tempfile.mkstemp(prefix=".specreplay-check.", dir=d)
            os.close(fd)
            os.unlink(made)
    except OSError as exc:
        what = "cannot be created" if kind == DIRECTORY else "cannot be written"
        raise OutputPathError(f"{target}: {what}: {d} takes no new {kind} ({exc.strerror or exc})") from None


def check_input_file(path: str | Path) -> Path:
    """``path`` if it is a readable file, else InputPathError."""
    p = Path(path)
    if not p.exists():
        raise InputPathError(f"{p}: no such file")
    if p.is_dir():
        raise InputPathError(f"{p}: is a directory; expected a file")
    if not os.access(p, os.R_OK):
        raise InputPathError(f"{p}: no permission to read it")
    return p


def _nearest_existing(d: Path) -> Path:
    d = Path(os.path.abspath(d))
    while not d.exists() and d != d.parent:
        d = d.parent
    return d


class OutputDir:
    """argparse type of an output directory option (the value stays a string). ``writes``: what the
    command writes there, ``{dir}`` standing for the directory; ``prints``: it prints its results
    too. Both only word the advice for a new directory named like a file (check_output): ``report
    -o x.html`` must not be told to redirect stdout, which gives no page."""

    def __init__(self, writes: str = "its files into {dir}/", prints: bool = False) -> None:
        self.writes, self.prints = writes, prints

    def __call__(self, text: str) -> str:
        try:
            check_output(text, DIRECTORY, self.writes, self.prints)
        except OutputPathError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    def __repr__(self) -> str:  # argparse names a failing type by its __name__, else by repr
        return "output directory"


output_dir = OutputDir()  # a command that says nothing more of what it writes there


def output_file(text: str) -> str:
    """argparse type of an output file option (the value stays a string)."""
    return _as_argparse(text, FILE)


def input_file(text: str) -> str:
    """argparse type of an input file option that must exist before the command starts."""
    try:
        check_input_file(text)
    except InputPathError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def is_inline_json(text: str) -> bool:
    """An option value given as a JSON object's text rather than a file name."""
    return text.lstrip().startswith("{")


def input_file_or_json(text: str) -> str:
    """argparse type of an option that takes a JSON file (which must exist) or inline JSON."""
    return text if is_inline_json(text) else input_file(text)


def _as_argparse(text: str, kind: str) -> str:
    try:
        check_output(text, kind)
    except OutputPathError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def output_kind(argtype: object) -> str | None:
    """DIRECTORY or FILE for an option declared with one of this module's output types, else None:
    how the CLI (and the tests) find every output a command declares."""
    if isinstance(argtype, OutputDir):
        return DIRECTORY
    return FILE if argtype is output_file else None
