"""Two-person test images for the Paired Stereotype Test: real photos composed side by side.

The crops are those of :func:`image_fixtures.two_people` (300 x 300 around each face):
``woman`` is skimage's astronaut (Eileen Collins), ``man`` skimage's cameraman. The real
``agegender`` classifier gets them right on these composites in both orders (p_female of the
woman 0.83 on the left, 0.95 on the right; of the man 0.02-0.03), so tests label at threshold
0.8. Grace Hopper is not used: agegender calls her male (see tests/backends/test_classifiers.py).
"""

from __future__ import annotations

from functools import cache

import numpy as np
from image_fixtures import photo

LABEL_THRESHOLD = 0.8  # agegender gives the composed astronaut 0.83-0.95


@cache
def person(name: str) -> np.ndarray:
    """A 300 x 300 crop around the face: ``woman`` (astronaut) or ``man`` (cameraman)."""
    if name == "woman":
        return np.ascontiguousarray(photo("astronaut")[0:300, 100:400])
    if name == "man":
        return np.ascontiguousarray(photo("camera")[20:320, 90:390])
    raise KeyError(name)


def side_by_side(*names: str) -> np.ndarray:
    """The named crops left to right in one image (e.g. ``side_by_side("woman", "man")``)."""
    return np.ascontiguousarray(np.concatenate([person(n) for n in names], axis=1))
