"""Random-weight Stable Diffusion pipelines and the real CLIP tokenizer, built offline.

:func:`random_sd_pipeline` builds a ``StableDiffusionPipeline`` from configs (``arch="tiny"``
for tests and demos, ``arch="sd15"`` for the real SD 1.5 architecture in benchmarks): same code
paths and FLOPs as the real model, meaningless pictures. :func:`write_clip_tokenizer_files`
writes the real CLIP BPE tokenizer (49,408 tokens) from open_clip's bundled vocabulary, so
no hub download is needed. Test and benchmark support only: no stage imports this module.

Heavy libraries (torch, diffusers, transformers) are imported inside functions only.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import tempfile
from importlib import util
from pathlib import Path
from typing import Any

from corpus_audit.core.errors import ModelError


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP byte -> printable unicode table (the BPE's base alphabet)."""
    bs = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, (chr(c) for c in cs), strict=True))


def open_clip_bpe_path() -> Path:
    """The BPE merges file open_clip ships (``bpe_simple_vocab_16e6.txt.gz``), without importing it."""
    spec = util.find_spec("open_clip")
    if spec is None or spec.origin is None:
        raise ModelError("open_clip is not installed: it ships the CLIP BPE vocabulary needed here")
    return Path(spec.origin).parent / "bpe_simple_vocab_16e6.txt.gz"


def write_clip_tokenizer_files(out_dir: Path | str, bpe_path: Path | str | None = None) -> Path:
    """Write ``vocab.json`` + ``merges.txt`` of the real CLIP tokenizer (49,408 tokens).

    Built from open_clip's gzip BPE file exactly as open_clip's ``SimpleTokenizer`` does, so
    token ids equal those of ``openai/clip-vit-large-patch14``'s tokenizer.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bpe = Path(bpe_path) if bpe_path else open_clip_bpe_path()
    with gzip.open(bpe) as fh:
        merges = fh.read().decode("utf-8").split("\n")[1 : 49152 - 256 - 2 + 1]
    base = list(_bytes_to_unicode().values())
    vocab = base + [v + "</w>" for v in base] + ["".join(m.split()) for m in merges]
    vocab += ["<|startoftext|>", "<|endoftext|>"]
    (out / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(vocab)}), "utf-8")
    (out / "merges.txt").write_text("#version: 0.2\n" + "\n".join(merges) + "\n", "utf-8")
    return out


def clip_tokenizer(files_dir: Path | str) -> Any:
    """A ``CLIPTokenizer`` (77-token context) from the files of :func:`write_clip_tokenizer_files`."""
    from transformers import CLIPTokenizer

    d = Path(files_dir)
    return CLIPTokenizer(
        str(d / "vocab.json"), str(d / "merges.txt"), pad_token="<|endoftext|>", model_max_length=77
    )


def offline_clip_tokenizer(files_dir: Path | str | None = None) -> Any:
    """:func:`clip_tokenizer` from ``files_dir``, or (None) from files written to a temporary
    folder from open_clip's bundled vocabulary."""
    if files_dir is not None:
        return clip_tokenizer(files_dir)
    with tempfile.TemporaryDirectory() as tmp:
        return clip_tokenizer(write_clip_tokenizer_files(tmp))


def _clip_tower(hidden: int, mlp: int, *, layers: int, heads: int, **extra: Any) -> dict[str, Any]:
    """A CLIP text or vision tower's config keywords: width ``hidden``, MLP width ``mlp``,
    ``layers`` transformer blocks of ``heads`` heads, plus the tower's own ``extra`` keys."""
    return dict(
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        **extra,
    )


_ARCHS: dict[str, dict[str, Any]] = {
    # A few-hundred-kilobyte SD-shaped model: seconds on CPU at 32x32, 2 steps.
    "tiny": {
        "unet": dict(
            sample_size=8,
            layers_per_block=1,
            block_out_channels=(32, 64),
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=32,
            attention_head_dim=4,
            norm_num_groups=16,
        ),
        "vae": dict(
            block_out_channels=(16, 32),
            down_block_types=("DownEncoderBlock2D",) * 2,
            up_block_types=("UpDecoderBlock2D",) * 2,
            norm_num_groups=16,
            sample_size=32,
        ),
        "text": _clip_tower(32, 64, layers=2, heads=4, projection_dim=32),
        "vision": _clip_tower(32, 64, layers=2, heads=4, image_size=32, patch_size=8),
        "projection_dim": 32,
        "image_size": 32,
    },
    # Stable Diffusion v1.5 (runwayml / stable-diffusion-v1-5): UNet 860 M, VAE 84 M, CLIP
    # ViT-L/14 text encoder 123 M, safety checker on CLIP ViT-L/14 vision at 224 px.
    "sd15": {
        "unet": dict(
            sample_size=64,
            layers_per_block=2,
            block_out_channels=(320, 640, 1280, 1280),
            down_block_types=("CrossAttnDownBlock2D",) * 3 + ("DownBlock2D",),
            up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * 3,
            cross_attention_dim=768,
            attention_head_dim=8,
            norm_num_groups=32,
        ),
        "vae": dict(
            block_out_channels=(128, 256, 512, 512),
            down_block_types=("DownEncoderBlock2D",) * 4,
            up_block_types=("UpDecoderBlock2D",) * 4,
            layers_per_block=2,
            norm_num_groups=32,
            sample_size=512,
        ),
        "text": _clip_tower(
            768, 3072, layers=12, heads=12, projection_dim=768, hidden_act="quick_gelu"
        ),
        "vision": _clip_tower(
            1024, 4096, layers=24, heads=16, image_size=224, patch_size=14, hidden_act="quick_gelu"
        ),
        "projection_dim": 768,
        "image_size": 224,
    },
}


def random_sd_pipeline(
    arch: str = "tiny",
    *,
    tokenizer_dir: Path | str | None = None,
    safety_checker: bool = False,
    scheduler: str = "PNDMScheduler",
    seed: int = 0,
    device: str | None = None,
) -> Any:
    """A ``StableDiffusionPipeline`` with random weights, built offline from configs.

    ``arch``: ``tiny`` (tests) or ``sd15`` (the SD 1.5 architecture, for timing). The
    tokenizer is the real CLIP BPE tokenizer (``tokenizer_dir`` holding vocab.json/merges.txt,
    else written from open_clip's bundled vocabulary). ``safety_checker`` adds a random-weight
    ``StableDiffusionSafetyChecker`` and a CLIP image processor. The scheduler has SD 1.x's
    training configuration (scaled-linear betas 0.00085-0.012, 1000 steps). ``device``
    (e.g. ``"cuda"``) creates the weights there directly (fast for ``sd15``); float32.
    """
    import diffusers
    import torch
    from diffusers import AutoencoderKL, StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPTextConfig, CLIPTextModel

    if arch not in _ARCHS:
        raise ValueError(f"arch: {arch!r} is not one of {sorted(_ARCHS)}")
    spec = _ARCHS[arch]
    torch.manual_seed(seed)
    tokenizer = offline_clip_tokenizer(tokenizer_dir)
    place = torch.device(device) if device else contextlib.nullcontext()
    with place:
        unet = UNet2DConditionModel(in_channels=4, out_channels=4, **spec["unet"])
        vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, **spec["vae"])
        text_config = CLIPTextConfig(vocab_size=49408, max_position_embeddings=77, **spec["text"])
        text_encoder = CLIPTextModel(text_config)
    scheduler_cls = getattr(diffusers, scheduler)
    sched = scheduler_cls(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        num_train_timesteps=1000,
        steps_offset=1,
        **({"skip_prk_steps": True} if scheduler == "PNDMScheduler" else {}),
        **({"set_alpha_to_one": False} if scheduler in ("PNDMScheduler", "DDIMScheduler") else {}),
    )
    checker = extractor = None
    if safety_checker:
        from diffusers.pipelines.stable_diffusion.safety_checker import (
            StableDiffusionSafetyChecker,
        )

        clip_config = CLIPConfig(
            text_config=dict(spec["text"]),
            vision_config=dict(spec["vision"]),
            projection_dim=spec["projection_dim"],
        )
        with place:
            checker = StableDiffusionSafetyChecker(clip_config)
        size = spec["image_size"]
        extractor = CLIPImageProcessor(
            size={"shortest_edge": size}, crop_size={"height": size, "width": size}
        )
    return StableDiffusionPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=sched,
        safety_checker=checker,
        feature_extractor=extractor,
        requires_safety_checker=safety_checker,
    )
