"""Caption paraphrasing (METHODS 1.5 "paraphrased captions"): a role on the text generators.

Each caption of a training subset is rewritten by a language model with the published
instruction (:data:`INSTRUCTION`, Seshadri et al.) at temperature 0, i.e. greedy decoding, so
a paraphrase is a deterministic function of (model, caption, occupation). The generate stage
stores it in the ``paraphrases`` table next to its caption, with ``contains_occupation`` telling
whether the model kept the occupation word it was told to keep, and then uses it as a prompt.

The models are the text generators (:data:`~corpus_audit.backends.text_generators.TEXT_GENERATORS`,
one registry: a local LM is added in one place). The config value ``generate.paraphraser`` is
``"<backend>:<model>"`` or a plain model (``transformers``). A backend whose factory offers an
``instruction_model`` (the ``transformers`` one: a local directory or a hub id of a
text-to-text model, T5/FLAN-T5/BART, or a causal LM, its chat template when the tokenizer has
one; :mod:`corpus_audit.backends.text_generators.instruction_lm`) paraphrases with it; any other
text generator is asked for one completion per caption at temperature 0 (:class:`GreedyText`).

Heavy libraries (torch, transformers) are imported inside the backends only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from corpus_audit.backends import text_generators
from corpus_audit.backends.text_generators import (
    SamplingSettings,
    TextRequest,
    generate_all,
    load_text_generator,
)
from corpus_audit.backends.text_generators.instruction_lm import InstructionLM
from corpus_audit.core.specs import split_spec
from corpus_audit.methods.answers import clean_output

# The instruction of Seshadri, Singh & Elazar (METHODS 1.5), verbatim; [OCCUPATION] and
# [CAPTION] become {occupation} and {caption}.
INSTRUCTION = (
    "Please paraphrase the phrase/sentence below. You can change words without changing the "
    "original meaning or intent. You must include the word {occupation}. "
    "Phrase/Sentence: {caption}"
)
GREEDY = "greedy (temperature 0)"


def instruction(caption: str, occupation: str) -> str:
    """The published instruction for one caption and the occupation word it must keep."""
    return INSTRUCTION.format(occupation=occupation, caption=caption)


def keeps_occupation(text: str, forms: Iterable[str]) -> bool:
    """Whether ``text`` names the occupation: any surface form as a whole word, any case.

    ``forms`` are the lexicon's lower-case forms (singular, plural, synonyms, hyphen/space
    variants), e.g. ``("nurse", "nurses")``.
    """
    low = " ".join(text.lower().split())
    for form in forms:
        f = " ".join(form.lower().split())
        if f and re.search(r"(?<![\w-])" + re.escape(f) + r"(?![\w-])", low):
            return True
    return False


class Paraphraser(Protocol):
    """What the generate stage needs from a paraphrasing model."""

    name: str  # recorded in paraphrases.paraphraser: "<backend>:<model>"

    def paraphrase(self, items: Sequence[tuple[str, str]]) -> list[str]:
        """One paraphrase per (caption, occupation word), in order; deterministic."""
        ...

    def describe(self) -> dict[str, Any]:
        """Provenance: backend, model class, decoding settings, library versions."""
        ...

    def close(self) -> None: ...


class InstructionModel(Protocol):
    """A model asked one thing per item, greedily (:class:`InstructionLM`, :class:`GreedyText`)."""

    def complete(self, instructions: Sequence[str]) -> list[str]: ...

    def describe(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


def paraphraser_name(spec: str) -> str:
    """``generate.paraphraser`` as recorded: ``"<backend>:<model>"`` (a plain model, or one
    whose prefix names no text generator: ``transformers:<spec>``)."""
    backend, model = split_spec(spec, text_generators.TEXT_GENERATORS, "transformers")
    return f"{backend}:{model}"


def load_paraphraser(
    spec: str, *, device: str = "auto", max_new_tokens: int = 77, batch_size: int = 16
) -> Paraphraser:
    """The paraphraser for ``generate.paraphraser``: the text generator's instruction model
    when it offers one, else the generator itself asked greedily; raises
    :class:`~corpus_audit.core.errors.ModelError` if unloadable."""
    registry = text_generators.TEXT_GENERATORS  # read when called (a test's own registry)
    backend, model = split_spec(spec, registry, "transformers")
    offered = getattr(registry.get(backend), "instruction_model", None)
    if offered is not None:
        lm = offered(model, device=device, max_new_tokens=max_new_tokens, batch_size=batch_size)
    else:
        sampling = SamplingSettings(temperature=0.0, max_tokens=max_new_tokens)
        lm = GreedyText(
            load_text_generator(
                f"{backend}:{model}", sampling, device=device, batch_size=batch_size
            )
        )
    return TextParaphraser(f"{backend}:{model}", lm)


class TextParaphraser:
    """The paraphrase role on an instruction model: the published instruction per
    (caption, occupation word), one greedy answer each."""

    def __init__(self, name: str, lm: InstructionModel) -> None:
        self.name = name
        self.lm = lm

    @property
    def device(self) -> Any:
        """The model's device (recaption records it), None when it has none."""
        return getattr(self.lm, "device", None)

    def paraphrase(self, items: Sequence[tuple[str, str]]) -> list[str]:
        return self.lm.complete([instruction(caption, occ) for caption, occ in items])

    def describe(self) -> dict[str, Any]:
        info = dict(self.lm.describe())
        versions = info.pop("versions", None)
        info["instruction"] = INSTRUCTION
        if versions is not None:
            info["versions"] = versions
        return info

    def close(self) -> None:
        self.lm.close()


class GreedyText:
    """A text generator asked for one completion per instruction at temperature 0 (the
    paraphrase role on a backend without an instruction model)."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    def complete(self, instructions: Sequence[str]) -> list[str]:
        requests = [TextRequest(text, 1, 0) for text in instructions]
        answers = generate_all(self.generator, requests)
        return [clean_output(got[0].text) if got else "" for got in answers]

    def describe(self) -> dict[str, Any]:
        return {**self.generator.describe(), "decoding": GREEDY}

    def close(self) -> None:
        self.generator.close()


def transformers_completer(
    model: str, *, device: str = "auto", max_new_tokens: int = 60
) -> Callable[[str], str]:
    """``complete(instruction) -> answer`` with a local transformers LM (greedy decoding;
    the chat template when the tokenizer has one), the ``transformers`` text generator's
    :class:`InstructionLM`: FairCritic's language-model feedback writer
    (:class:`corpus_audit.methods.pst.critic.LMFeedback`) asks it for guidelines."""
    lm = InstructionLM(model, device=device, max_new_tokens=max_new_tokens, batch_size=1)

    def complete(instruction: str) -> str:
        return lm.complete([instruction])[0]

    return complete
