"""Prompts nobody tuned for acceptance: text that ships with Python and numpy, taken by fixed rules.

Code prompts are a function stub rebuilt from a standard-library function: ``def NAME(SIGNATURE):``
plus the first paragraph of ``inspect.getdoc`` as its docstring; the model writes the body. Prose
prompts are the first lines of the Zen of Python (``this``, rot13-decoded), the first paragraph of
the ``json`` module's docstring, and the first two paragraphs of numpy's installed license file.
Stdlib only (numpy's license is read through ``importlib.metadata``, numpy is not imported).
"""

from __future__ import annotations

import codecs
import importlib
import importlib.metadata
import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class StdPrompt:
    name: str
    kind: str  # "code" or "prose"
    source: str  # where the text comes from, exactly
    text: str


# (module, attribute) of the functions whose stubs become code prompts.
CODE_FUNCTIONS = (("json", "dumps"), ("textwrap", "wrap"), ("itertools", "groupby"))


def first_paragraphs(text: str, count: int = 1) -> str:
    return "\n\n".join(text.strip().split("\n\n")[:count])


def function_stub(module: str, attr: str) -> StdPrompt:
    func = getattr(importlib.import_module(module), attr)
    doc = first_paragraphs(inspect.getdoc(func) or "").replace("\n", "\n    ")
    text = f'def {attr}{inspect.signature(func)}:\n    """{doc}\n    """\n'
    source = (
        f"`def {attr}` + `inspect.signature({module}.{attr})` + first paragraph of `inspect.getdoc({module}.{attr})`"
    )
    return StdPrompt(f"{module}.{attr}", "code", source, text)


def zen_prompt(lines: int = 8) -> StdPrompt:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        import this

    zen = codecs.decode(this.s, "rot13").strip().splitlines()
    return StdPrompt(
        "zen",
        "prose",
        f"first {lines} lines of the Zen of Python (`codecs.decode(this.s, 'rot13')`)",
        "\n".join(zen[:lines]) + "\n",
    )


def module_doc_prompt(module: str) -> StdPrompt:
    text = first_paragraphs(inspect.getdoc(importlib.import_module(module)) or "")
    return StdPrompt(f"{module}-doc", "prose", f"first paragraph of `inspect.getdoc({module})`", text + "\n")


def license_prompt(dist: str = "numpy", paragraphs: int = 2) -> StdPrompt:
    files = importlib.metadata.distribution(dist).files or []
    lic = next(f for f in files if f.name.upper().startswith("LICENSE"))
    text = first_paragraphs(lic.read_text(encoding="utf-8"), paragraphs)
    return StdPrompt(
        f"{dist}-license", "prose", f"first {paragraphs} paragraphs of {dist}'s installed `{lic}`", text + "\n"
    )


def std_prompts() -> list[StdPrompt]:
    """Six prompts, code and prose alternating, in a fixed order."""
    code = [function_stub(m, a) for m, a in CODE_FUNCTIONS]
    prose = [zen_prompt(), module_doc_prompt("json"), license_prompt()]
    return [p for pair in zip(code, prose) for p in pair]


def prompts_markdown(prompts: list[StdPrompt], header: str) -> str:
    parts = [header]
    for i, p in enumerate(prompts, 1):
        parts.append(f"## {i}. `{p.name}` ({p.kind})\n\nSource: {p.source}.\n\n```text\n{p.text}```\n")
    return "\n".join(parts)
