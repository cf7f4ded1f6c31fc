"""Paraphrased captions (METHODS 1.5): the published instruction, greedy decoding, storage.

The language models are tiny random-weight T5 (text-to-text) and GPT-2 (causal) models built
offline from configs with the real CLIP BPE tokenizer: they test the plumbing (loading by
path, batching, greedy = deterministic decoding, storage, the occupation flag, use as prompts),
not paraphrase quality; their output is gibberish that never keeps the occupation word.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import test_generate as tg

from corpus_audit.backends import text_generators
from corpus_audit.backends.fakes.paraphrasers import random_paraphraser_model
from corpus_audit.backends.paraphrasers import (
    INSTRUCTION,
    TextParaphraser,
    clean_output,
    instruction,
    keeps_occupation,
    load_paraphraser,
    paraphraser_name,
)
from corpus_audit.backends.text_generators import TEXT_GENERATORS, Completion
from corpus_audit.core.errors import ModelError
from corpus_audit.core.registry import Registry
from corpus_audit.methods.lexicon import load_occupations
from corpus_audit.stages.generate import generate

# Fixtures and helpers shared with test_generate (the tiny SD pipeline, the CLIP tokenizer).
tokenizer_dir = tg.tokenizer_dir
tiny_sd = tg.tiny_sd
TINY, _rows, fill_tables = tg.TINY, tg._rows, tg.fill_tables

ITEMS = [
    ("Our Country Nurse: Can East End Nurse Sarah find a new life caring for babies?", "nurse"),
    ("Lightning research. Scientists prepare a rocket", "scientist"),
    ("War Nurse with Golden Retriever", "nurse"),
]


@pytest.fixture(scope="session", params=["t5", "gpt2"])
def tiny_lm(request, tmp_path_factory, tokenizer_dir) -> Path:
    out = tmp_path_factory.mktemp("lm") / f"tiny-{request.param}"
    return random_paraphraser_model(out, request.param, tokenizer_dir=tokenizer_dir)


def test_instruction_is_the_published_one():
    assert instruction("A nurse at work", "nurse") == (
        "Please paraphrase the phrase/sentence below. You can change words without changing the "
        "original meaning or intent. You must include the word nurse. Phrase/Sentence: "
        "A nurse at work"
    )
    assert "{occupation}" in INSTRUCTION and "{caption}" in INSTRUCTION


@pytest.mark.parametrize(
    ("text", "forms", "expected"),
    [
        ("A nurse smiling at a patient", ("nurse", "nurses"), True),
        ("Two NURSES on duty", ("nurse", "nurses"), True),
        ("a nursery with toys", ("nurse", "nurses"), False),
        ("The prime  minister speaks", ("prime minister", "prime-minister"), True),
        ("vice-president of sales", ("president",), False),
        ("", ("nurse",), False),
    ],
)
def test_keeps_occupation(text, forms, expected):
    assert keeps_occupation(text, forms) is expected


def test_clean_output():
    assert (
        clean_output('\n  "A nurse helps a patient."  \nSecond line') == "A nurse helps a patient."
    )
    assert clean_output("   \n ") == ""


def test_greedy_paraphrases_are_deterministic(tiny_lm):
    para = load_paraphraser(str(tiny_lm), device="cpu", max_new_tokens=12, batch_size=2)
    first = para.paraphrase(ITEMS)
    again = load_paraphraser(str(tiny_lm), device="cpu", max_new_tokens=12, batch_size=3)
    assert len(first) == len(ITEMS) and all(isinstance(t, str) for t in first)
    assert first == para.paraphrase(ITEMS) == again.paraphrase(ITEMS)  # batching changes nothing
    info = para.describe()
    assert info["decoding"].startswith("greedy") and info["instruction"] == INSTRUCTION
    assert info["model_class"] in {"T5ForConditionalGeneration", "GPT2LMHeadModel"}
    assert para.name == f"transformers:{tiny_lm}"


def test_unknown_paraphraser_offline_is_a_clear_error(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelError, match=r"no-such-org/no-such-lm: .*offline"):
        load_paraphraser("no-such-org/no-such-lm", device="cpu")


def _paraphrase_study(make_study, laion_path, tiny_sd, paraphraser, **extra):
    study = make_study(
        [laion_path],
        generate={"models": [str(tiny_sd)], "images_per_prompt": 1, "images_per_caption": 2,
                  "paraphraser": paraphraser, "paraphrase_max_new_tokens": 8,
                  "caption_prompts": "all", **TINY, **extra},
        engine={"device": "cpu"},
        select={"sample_unit": "captions"},  # no training images here: the first N captions
    )  # fmt: skip
    tables = fill_tables(study, laion_path, templates=(1,), per_occupation=2)
    return study, tables


def test_stage_stores_paraphrases_next_to_captions(
    make_study, laion_path, tiny_sd, tmp_path, tokenizer_dir, monkeypatch
):
    lm = random_paraphraser_model(tmp_path / "t5", "t5", tokenizer_dir=tokenizer_dir)
    study, tables = _paraphrase_study(make_study, laion_path, tiny_sd, str(lm),
                                      paraphrase_keep_lost=True)  # fmt: skip
    run = generate(study, progress=False)
    rows = study.con.execute(
        "SELECT caption_id, occupation, paraphraser, text, contains_occupation FROM paraphrases "
        "ORDER BY occupation, caption_id"
    ).fetchall()
    pairs = sorted((occ, cid) for occ, cids in tables["samples"].items() for cid in cids)
    assert sorted((r[1], r[0]) for r in rows) == pairs
    occupations = {o.name: o for o in load_occupations()}
    direct = load_paraphraser(str(lm), device="cpu", max_new_tokens=8)
    expected = direct.paraphrase(
        [(tables["texts"][cid], occupations[occ].display) for cid, occ, *_ in rows]
    )
    assert [r[3] for r in rows] == expected
    for _cid, occ, name, text, contains in rows:
        assert name == f"transformers:{lm}"
        assert contains is keeps_occupation(text, occupations[occ].forms)
    images = _rows(study, "strategy = 'paraphrased:keyword'")
    assert len(images) == 2 * len(rows)
    texts = {(r[0], r[1]): r[3] for r in rows}
    for image in images:
        assert image["prompt_text"] == texts[(image["caption_id"], image["occupation"])]
        assert image["prompt_id"] is None and "/paraphrases/" in image["path"]
    assert run.provenance["paraphrased"] == len(rows)

    # Rerun: nothing paraphrased or generated again.
    def refuse(self, items):
        raise AssertionError("paraphrased twice")

    monkeypatch.setattr(TextParaphraser, "paraphrase", refuse)
    again = generate(study, progress=False)
    assert again.skipped and again.rows_out == 0
    assert study.count("paraphrases") == len(rows)


def test_lost_occupation_is_counted_and_skipped(
    make_study, laion_path, tiny_sd, tmp_path, tokenizer_dir
):
    lm = random_paraphraser_model(tmp_path / "gpt2", "gpt2", tokenizer_dir=tokenizer_dir)
    study, tables = _paraphrase_study(make_study, laion_path, tiny_sd, str(lm))
    run = generate(study, progress=False)
    n = study.count("paraphrases")
    lost = study.count("paraphrases", "NOT contains_occupation")
    assert n == 4 and lost == n  # random weights never keep the word
    assert (
        run.dropped.get("paraphrase_lost_occupation", 0) + run.dropped.get("paraphrase_empty", 0)
        == n
    )
    assert not _rows(study, "strategy LIKE 'paraphrased:%'")
    assert f"{lost} lost the occupation word" in " ".join(run.messages)


class EchoGenerator:
    """A text generator that answers each instruction with its caption: a paraphraser is a
    text generator registered once (issue 45), asked greedily, one completion per caption."""

    def __init__(self, model, settings, **_):
        assert settings.temperature == 0 and settings.max_tokens == 8  # greedy, the cap
        self.name, self.settings = f"echo:{model}", settings

    def stream(self, requests):
        for i, request in enumerate(requests):
            assert request.n == 1
            caption = request.prompt.split("Phrase/Sentence: ", 1)[1]
            yield i, [Completion(text=caption, finish_reason="stop")]

    def describe(self):
        return {"backend": "echo"}

    def close(self):
        pass


def test_a_paraphraser_is_a_text_generator_and_kept_paraphrases_become_prompts(
    make_study, laion_path, tiny_sd, monkeypatch
):
    registry = Registry("text generator")  # the built-in backends and this test's
    for name, factory in TEXT_GENERATORS.items():
        registry.register(name, factory)
    registry.register("echo", EchoGenerator)
    monkeypatch.setattr(text_generators, "TEXT_GENERATORS", registry)
    assert paraphraser_name("echo:identity") == "echo:identity"
    assert paraphraser_name("some/hub-id") == "transformers:some/hub-id"
    study, tables = _paraphrase_study(make_study, laion_path, tiny_sd, "echo:identity")
    with pytest.warns(UserWarning, match="truncated"):  # the long scientist captions
        generate(study, progress=False)
    assert study.count("paraphrases", "paraphraser = 'echo:identity' AND contains_occupation") == 4
    images = _rows(study, "strategy = 'paraphrased:keyword'")
    assert len(images) == 8
    assert {i["prompt_text"] for i in images} == set(tables["texts"].values())
