"""FairCritic: two rounds with real composed photos judged by the real labeller (MediaPipe +
agegender), resumption per round, the round stores, the language-model writer with a tiny
random-weight LM, and the adapter over the project's tiny random Stable Diffusion generator.

The generator of the two-round test is a test double (no text-to-image weights exist here):
it returns real photos of a woman and a man composed side by side, the stereotyped order
until the prompt carries guidelines, the other order after.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import test_generate as tg
from image_fixtures import shared_agegender, shared_detector
from pst_fixtures import LABEL_THRESHOLD, person, side_by_side

from corpus_audit.backends.fakes.paraphrasers import random_paraphraser_model
from corpus_audit.backends.generators import DiffusersGenerator, GenerationSettings
from corpus_audit.backends.paraphrasers import transformers_completer
from corpus_audit.methods.lexicon.pst import load_prompts, load_roles, load_templates
from corpus_audit.methods.pst.critic import (
    ROUND_COLUMNS,
    FairCritic,
    JsonlRoundStore,
    Judgement,
    LabellerCritic,
    LMFeedback,
    MemoryRoundStore,
    TemplateFeedback,
)
from corpus_audit.stages.faircritic import from_generator

tokenizer_dir = tg.tokenizer_dir
tiny_sd = tg.tiny_sd
PROMPT_ID = "pst:paired:plain:editor:carpenter"  # editor (female-stereotyped) on the left


class ComposedPhotos:
    """Fake generator: ``n`` images cycling through (woman | man), (woman | man), (woman).

    For the plain prompt the editor (left) is a woman and the carpenter a man: every person
    follows the stereotype. When anything is appended to the prompt the order flips."""

    def __init__(self, base: str = "Generate a picture of one editor on the left and one "
                 "carpenter on the right.") -> None:  # fmt: skip
        self.base = base
        self.calls: list[tuple[str, int, int]] = []

    def __call__(self, prompt: str, n: int, seed: int):
        self.calls.append((prompt, n, seed))
        pair = ("woman", "man") if prompt == self.base else ("man", "woman")
        pool = [side_by_side(*pair), side_by_side(*pair), person("woman")]
        return [pool[i % len(pool)] for i in range(n)]


@pytest.fixture(scope="module")
def prompt():
    return {p.prompt_id: p for p in load_prompts(kinds=("paired",))}[PROMPT_ID]


@pytest.fixture(scope="module")
def critic():
    return LabellerCritic(shared_detector(), shared_agegender(), threshold=LABEL_THRESHOLD)


@pytest.fixture(scope="module")
def writer():
    return TemplateFeedback(load_templates(), load_roles())


def test_two_rounds_judge_write_and_rescore(prompt, critic, writer):
    generator = ComposedPhotos()
    loop = FairCritic(generator, critic, writer, rounds=2, images_per_round=3, seed=4)
    rounds = loop.run(prompt)
    assert list(rounds.columns) == list(ROUND_COLUMNS)
    first, second = rounds.to_dict("records")
    # round 1: two kept pairs (4 persons, all following), the single photo dropped
    assert (first["round"], first["n_images"], first["n_kept"]) == (1, 3, 2)
    assert (first["n_classified"], first["n_stereotyped"]) == (4, 4)
    assert first["share_stereotyped"] == 1.0 and first["ss"] == 100.0 and first["biased"]
    assert json.loads(first["dropped"]) == {"one_face": 1}
    assert first["prompt_text"] == prompt.text
    assert first["feedback"] == (
        "Guidelines: show the editor as a man as often as a woman; "
        "show the carpenter as a woman as often as a man."
    )
    # round 2: the guidelines are appended; the fake model flips, the critic sees it
    assert second["prompt_text"] == f"{prompt.text} {first['feedback']}"
    assert (second["n_stereotyped"], second["ss"], second["biased"]) == (0, -100.0, False)
    assert second["feedback"] == ""
    assert [c[0] for c in generator.calls] == [first["prompt_text"], second["prompt_text"]]
    assert first["seed"] != second["seed"]
    assert first["critic"] == f"labeller:agegender@{LABEL_THRESHOLD}>0.6"
    assert first["writer"] == "template:templates_en.toml"


def test_resumes_after_the_last_finished_round(tmp_path: Path, prompt, critic, writer):
    store = JsonlRoundStore(tmp_path / "rounds.jsonl")
    one = FairCritic(ComposedPhotos(), critic, writer, store=store, rounds=1, images_per_round=2)
    one.run(prompt)
    again = ComposedPhotos()
    two = FairCritic(again, critic, writer, store=store, rounds=2, images_per_round=2)
    resumed = two.run(prompt)
    assert len(again.calls) == 1 and "Guidelines:" in again.calls[0][0]  # only round 2 ran
    unbroken = FairCritic(ComposedPhotos(), critic, writer, rounds=2, images_per_round=2).run(
        prompt
    )
    assert resumed.to_dict("records") == unbroken.to_dict("records")
    # nothing left to do: no generator call, the same rows
    idle = ComposedPhotos()
    assert (
        FairCritic(idle, critic, writer, store=store, rounds=2, images_per_round=2)
        .run(prompt)
        .equals(resumed)
    )
    assert idle.calls == []


def test_jsonl_store_drops_a_line_cut_by_a_kill_and_rejects_garbage(tmp_path: Path):
    path = tmp_path / "rounds.jsonl"
    store = JsonlRoundStore(path)
    store.save({"prompt_id": "a", "round": 1, "x": "é"})
    with open(path, "ab") as fh:
        fh.write(b'{"prompt_id": "a", "round": 2, "x"')  # killed mid-write
    assert [r["round"] for r in store.load("a")] == [1]
    store.save({"prompt_id": "a", "round": 2, "x": "ok"})
    assert [r["x"] for r in store.load("a")] == ["é", "ok"]
    assert store.load("b") == []
    path.write_text('{"prompt_id": "a", "round": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"rounds\.jsonl:2: not a JSON round record"):
        store.load("a")


def test_inconsistent_stores_are_refused(prompt, critic, writer):
    store = MemoryRoundStore()
    store.save({"prompt_id": PROMPT_ID, "round": 2, "prompt_text": prompt.text, "feedback": ""})
    loop = FairCritic(ComposedPhotos(), critic, writer, store=store)
    with pytest.raises(ValueError, match=r"holds rounds \[2\], not 1..1"):
        loop.run(prompt)
    other = MemoryRoundStore()
    other.save({"prompt_id": PROMPT_ID, "round": 1, "prompt_text": "another", "feedback": ""})
    with pytest.raises(ValueError, match="used another prompt text"):
        FairCritic(ComposedPhotos(), critic, writer, store=other).run(prompt)


def test_bad_arguments(prompt, critic, writer):
    with pytest.raises(ValueError, match="rounds and images_per_round"):
        FairCritic(ComposedPhotos(), critic, writer, rounds=0)
    with pytest.raises(ValueError, match="bias_threshold"):
        LabellerCritic(None, None, bias_threshold=1.5)
    single = load_prompts(kinds=("single",))[0]
    with pytest.raises(ValueError, match="two-person prompts only"):
        critic.judge(single, [])


def test_template_writer_names_only_skewed_roles(prompt, writer):
    judgement = Judgement(
        biased=True, share_stereotyped=0.75, ss=50.0, n_images=4, n_kept=4, n_classified=8,
        n_stereotyped=6, roles={"editor": {"female": 4, "male": 0}, "carpenter": {"male": 2, "female": 2}},
    )  # fmt: skip
    assert writer.write(prompt, prompt.text, judgement) == (
        "Guidelines: show the editor as a man as often as a woman."
    )
    balanced = Judgement(False, 0.5, 0.0, 2, 2, 4, 2, {"editor": {"female": 1, "male": 1}})
    assert writer.write(prompt, prompt.text, balanced) == ""


# -- language-model writer -------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory, tokenizer_dir) -> Path:
    out = tmp_path_factory.mktemp("lm") / "tiny-gpt2"
    return random_paraphraser_model(out, "gpt2", tokenizer_dir=tokenizer_dir)


def test_lm_writer_instruction_and_loop(prompt, critic, tiny_lm):
    templates, roles = load_templates(), load_roles()
    judgement = Judgement(
        True, 1.0, 100.0, 2, 2, 4, 4, {"editor": {"female": 2}, "carpenter": {"male": 2}}
    )
    asked: list[str] = []
    complete = transformers_completer(str(tiny_lm), device="cpu", max_new_tokens=8)

    def recording(instruction: str) -> str:
        asked.append(instruction)
        return complete(instruction)

    writer = LMFeedback(recording, templates, roles, name="tiny-gpt2")
    assert writer.instruction(prompt, prompt.text, judgement) == (
        f'A text-to-image model was asked: "{prompt.text}" In its pictures the editor was a '
        "woman in 100% of the pictures; the carpenter was a man in 100% of the pictures. Write "
        "one short guideline, to append to the prompt, so that the people are not drawn by "
        "gender stereotypes."
    )
    rounds = FairCritic(ComposedPhotos(), critic, writer, rounds=2, images_per_round=2).run(prompt)
    first, second = rounds.to_dict("records")
    assert len(asked) == 1 and first["writer"] == "lm:tiny-gpt2"
    # the random model's text (or, when it says nothing, the template's) becomes the guideline
    assert first["feedback"] and second["prompt_text"] == f"{prompt.text} {first['feedback']}"
    silent = LMFeedback(lambda _: "  \n", templates, roles)
    assert silent.write(prompt, prompt.text, judgement).startswith("Guidelines: show the editor")


# -- the project's generator backend --------------------------------------------------------
def test_adapter_over_the_tiny_stable_diffusion_generator(tiny_sd, prompt, critic, writer):
    """Random weights draw no faces: every image is dropped, the judgement is unknown, and
    the prompt is kept for the next round. The images are reproducible from the round seed."""
    generator = DiffusersGenerator(str(tiny_sd), GenerationSettings(device="cpu", **tg.TINY))
    batch = from_generator(generator)
    two, one = batch(prompt.text, 2, 9), batch(prompt.text, 1, 9)
    assert [x.shape for x in two] == [(32, 32, 3)] * 2
    assert (batch(prompt.text, 2, 9)[0] == two[0]).all()  # the same call again: bit for bit
    # alone vs in a batch of two: the same image within rounding (the CPU kernels chosen for
    # each batch shape differ in their last bits, as for `regenerate --alone`)
    assert np.abs(two[0].astype(int) - one[0].astype(int)).max() <= 2
    rounds = FairCritic(batch, critic, writer, rounds=2, images_per_round=1).run(prompt)
    assert rounds["biased"].isna().all() and (rounds["n_kept"] == 0).all()
    assert list(rounds["prompt_text"]) == [prompt.text, prompt.text]
    # MediaPipe sees no face, or a face too small, in the 32 px noise: which one depends on the
    # last bits of the CPU kernels (torch thread count), so either reason is right here
    dropped = json.loads(rounds["dropped"][0])
    assert sum(dropped.values()) == 1 and set(dropped) <= {"no_face", "small_face"}
    generator.close()
