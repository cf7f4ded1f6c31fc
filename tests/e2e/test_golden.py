"""Golden values of the reproducibility promises (METHODS: seeds and samples).

A generated image is regenerated from ``derive_seed`` and a published sample is redrawn from
the study seed and the md5-keyed ranking of ``select``: a change to either would silently
make stored images unreproducible and published samples different. These values were taken
from the code as it is (2026-11) and must never change; if a test here fails, the change
broke reproducibility, not the test.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from corpus_audit.backends.generators import derive_seed

SEEDS = [  # (study seed, model, prompt key, index) -> seed
    ((0, "CompVis/stable-diffusion-v1-4", "template:nurse:0", 0), 185827936712639526),
    ((0, "CompVis/stable-diffusion-v1-4", "template:nurse:0", 499), 8791513384162196264),
    (
        (42, "runwayml/stable-diffusion-v1-5", "caption:keyword:photographer:123", 3),
        7707519721120362290,
    ),
    ((7, "local:/models/sd", "paraphrase:t5:nurse:9", 9), 6140645072741732108),
]


@pytest.mark.parametrize(("args", "seed"), SEEDS)
def test_derive_seed_golden(args: tuple, seed: int) -> None:
    assert derive_seed(*args) == seed
    # and the documented formula, written out here: SHA-256 of the fields joined by \x1f,
    # first 8 bytes big-endian, top bit cleared
    blob = "\x1f".join(str(a) for a in args).encode()
    assert int.from_bytes(hashlib.sha256(blob).digest()[:8], "big") & (2**63 - 1) == seed


# the first ranks of the keyword sample of the real LAION file, study seed 0:
# (occupation, rank) -> (caption_id, md5 of the caption text)
KEYWORD_SAMPLE = {
    ("chef", 1): (2580, "4e635290d0dc4390cfde5ffef61ec557"),
    ("chef", 2): (5809, "226999c8123f12549e730c42274070eb"),
    ("chef", 3): (8020, "156e1f70afc72465bb68b4069460693c"),
    ("nurse", 1): (6111, "c6b099a5428f5b6a3710c7fed4843877"),
    ("nurse", 2): (8731, "869e36a2e77f0875367eac59cfd5cbee"),
    ("nurse", 3): (1234, "3288077f2b84bcf06e3611b5016bda2d"),
    ("photographer", 1): (1496, "b8d3b484c1d2a6d050b2018d48eb2673"),
    ("photographer", 2): (5394, "0561c3be05d05c9ee7255258057ca080"),
    ("photographer", 3): (1092, "1698b77ef93b63adb08dc6ca8c9556e9"),
}


def test_keyword_sample_golden(tmp_path: Path, laion_path: Path) -> None:
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.select import select

    study = init_study(
        tmp_path / "study",
        [str(laion_path)],
        overrides={"select": {"sample_size": 5, "sample_unit": "captions"}},
    )
    try:
        select(study, progress=False)
        rows = study.con.execute(
            "SELECT s.occupation, s.rank, s.caption_id, c.text FROM samples s "
            "JOIN captions c USING (caption_id) WHERE s.strategy = 'keyword' "
            "AND s.occupation IN ('chef', 'nurse', 'photographer') AND s.rank <= 3"
        ).fetchall()
    finally:
        study.close()
    found = {
        (occ, rank): (cid, hashlib.md5(text.encode("utf-8")).hexdigest())
        for occ, rank, cid, text in rows
    }
    assert found == KEYWORD_SAMPLE
