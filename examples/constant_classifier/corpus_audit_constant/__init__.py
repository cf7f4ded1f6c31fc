"""An example corpus_audit plugin: the *constant* perceived-gender classifier.

Rule (the whole model): every image gets ``p_female = 0.5``, whatever it shows. At any
``label.threshold`` in [0.5, 1] that is the label ``ambiguous`` (see
``corpus_audit.backends.classifiers.decide``), so a study labelled with it reports no
perceived gender at all. It is a null model: it checks that a pipeline runs end to end with a
third-party classifier, and it is the floor a real classifier's agreement with human
annotators must beat. It reads no pixels and loads no weights.

How a plugin plugs in (pyproject.toml of this folder)::

    [project.entry-points."corpus_audit.classifiers"]
    constant = "corpus_audit_constant:BACKEND"

Once the distribution is installed, ``label.classifier = "constant"`` in ``study.toml`` is a
valid setting, ``corpus-audit plugins`` lists it, and the label stage records this
distribution's version in its provenance.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import metadata
from typing import Any

import numpy as np

from corpus_audit import ClassifierBackend

P_FEMALE = 0.5  # the constant answer, in [0, 1]
CLASSIFIER_ID = "constant:0.5"  # what labels.classifier holds for its rows


class ConstantClassifier:
    """``p_female(images, faces)`` = 0.5 for every image (module docstring)."""

    id = CLASSIFIER_ID

    def __init__(self) -> None:
        try:
            version = metadata.version("corpus-audit-constant-classifier")
        except metadata.PackageNotFoundError:
            version = "not installed"
        self.provenance: dict[str, Any] = {
            "classifier": CLASSIFIER_ID,
            "rule": "p_female = 0.5 for every image (a null model)",
            "plugin_version": version,
        }

    def p_female(self, images: Sequence[np.ndarray], faces: Sequence[Any]) -> np.ndarray:
        """Float64 array of shape ``(len(images),)``, every value 0.5."""
        if len(images) != len(faces):
            raise ValueError("images and faces differ in length")
        return np.full(len(images), P_FEMALE, dtype=np.float64)

    def close(self) -> None:
        """Nothing to free."""


def _build(label: Any, *, device: str = "auto", seed: int = 0) -> ConstantClassifier:
    return ConstantClassifier()


# the object the entry point names: how to build the classifier, and its rows' id
BACKEND = ClassifierBackend(_build, lambda label: CLASSIFIER_ID)
