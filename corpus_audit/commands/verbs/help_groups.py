"""The top-level ``corpus-audit --help``'s list of commands, in groups: the study, the stages
of each study kind in run order, import and export, tools (:data:`examples.GROUPS`)."""

from __future__ import annotations

import textwrap

from corpus_audit.commands.verbs.examples import GROUPS
from corpus_audit.core.catalogue import ON_DEMAND, RUN_ORDERS


def grouped_help(helps: dict[str, str]) -> str:
    """The commands of the top-level help in groups: the study, the stages by study kind (in
    run order), import and export, tools. Every command is listed once."""
    lines: list[str] = []

    def block(title: str, names: tuple[str, ...]) -> None:
        lines.append(f"{title}:")
        lines.extend(f"  {n:<15} {_short(helps[n])}" for n in names)

    block(*GROUPS[0])
    for kind, order in RUN_ORDERS.items():
        names = [n.replace("_", "-") for n in dict.fromkeys(order)]
        if kind == "amplification":
            names += [f"{n.replace('_', '-')} (on demand)" for n in ON_DEMAND]
        lines.append(f"stages of {KIND_TITLES.get(kind, kind)}, in order:")
        lines.extend(_wrap(" ".join(names)))
    for group in GROUPS[1:]:
        block(*group)
    listed = {n for _, names in GROUPS for n in names}
    stages = {n.replace("_", "-") for order in RUN_ORDERS.values() for n in order}
    stages |= {n.replace("_", "-") for n in ON_DEMAND}
    missing = [n for n in helps if n not in listed | stages]
    if missing:  # a new verb without a group still shows
        block("more", tuple(missing))
    return "\n".join(lines)


KIND_TITLES = {
    "amplification": "an amplification study",
    "pst": "a PST study (init --kind pst)",
    "llm": "an LLM study (init --kind llm)",
    "images": "a model-only study (init --kind images)",
}


def _short(text: str, width: int = 60) -> str:
    return textwrap.shorten(text, width, placeholder=" ...")


def _wrap(text: str, width: int = 76) -> list[str]:
    return textwrap.wrap(text, width, initial_indent="  ", subsequent_indent="  ")
