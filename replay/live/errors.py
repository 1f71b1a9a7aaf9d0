"""User errors of the live harness (one-line messages through the CLI, exit code 2)."""

from __future__ import annotations

from ..errors import SpecReplayError


class ModelLoadError(SpecReplayError):
    """A model path that is neither a Hugging Face directory nor a GGUF file, or fails to load."""


class PromptError(SpecReplayError):
    """A prompts file that cannot be turned into token ids."""


class SweepError(SpecReplayError):
    """A sweep specification (grid text, config list) that cannot be used."""


class OutputDirError(SpecReplayError):
    """An output directory that already holds files: writing into it would mix two runs."""
