"""Category-level gender distribution against official statistics (METHODS §3).

Expected shares are counted here with plain Python and the Wilson interval is written out by
its formula with a fixed z, independently of ``analysis.stats``.
"""

from __future__ import annotations

import io
import math
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from corpus_audit.core.errors import CorpusAuditError
from corpus_audit.methods.categories import (
    CATEGORY_COLUMNS,
    category_distribution,
    official_table,
)
from corpus_audit.methods.lexicon.official_stats import load_official_stats
from corpus_audit.methods.lexicon.prompt_sets import load_categories, load_occupation_prompts
from corpus_audit.report.figures import save
from corpus_audit.report.preference_figures import category_bars

Z95 = 1.959963984540054


def wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    denom = 1 + Z95**2 / n
    centre = (p + Z95**2 / (2 * n)) / denom
    half = Z95 / denom * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n))
    return 100 * max(0.0, centre - half), 100 * min(1.0, centre + half)


def test_hand_example_shares_intervals_and_gap():
    labels = pd.DataFrame(
        [
            ("m1", "en", "direct", "Healthcare & Social Services", lab)
            for lab in ["female"] * 3 + ["male", "ambiguous"]
        ]
        + [("m1", "de", "direct", "Healthcare & Social Services", "male")] * 4,
        columns=["model_id", "language", "variant", "category", "label"],
    )
    official = pd.DataFrame(
        [
            {
                "language": "en",
                "category": "Healthcare & Social Services",
                "official_pf": 70.0,
                "official_source": "S",
                "official_year": "2024",
                "official_country": "US",
                "official_basis": "category",
            },
        ]
    )
    table = category_distribution(labels, official)
    assert list(table.columns) == list(CATEGORY_COLUMNS)
    de, en = table.to_dict("records")  # sorted by language
    assert (en["n_images"], en["n_female"], en["n_male"], en["n_ambiguous"]) == (5, 3, 1, 1)
    assert (en["pct_female"], en["pct_male"], en["pct_ambiguous"]) == (60.0, 20.0, 20.0)
    assert en["percent_female"] == 75.0  # 3 / (3 + 1): ambiguous left out
    assert (en["ci_low"], en["ci_high"]) == pytest.approx(wilson(3, 4))
    assert (en["pct_ambiguous_low"], en["pct_ambiguous_high"]) == pytest.approx(wilson(1, 5))
    assert en["gap_pp"] == pytest.approx(5.0)
    assert en["official_country"] == "US" and pd.isna(en["prompt_set"])
    assert de["percent_female"] == 0.0 and de["ci_low"] == 0.0  # exact bound at k = 0
    assert pd.isna(de["official_pf"]) and pd.isna(de["gap_pp"])  # no German statistics given


@pytest.fixture(scope="module")
def real_labels() -> pd.DataFrame:
    """Labels of images 'generated' from the real MAGBIG and BAFIS prompts (en and de), by
    two models, with a fixed per-occupation pattern (a stand-in for the label stage)."""
    rows = []
    pattern = ["female", "male", "male", "ambiguous", "female", "male"]
    for spec in ("builtin:magbig/direct/en", "builtin:magbig/direct/de", "builtin:bafis/groups/de"):
        for prompt in load_occupation_prompts(spec):
            for model, shift in (("sd14", 0), ("flux", 1)):
                count = 3 + len(prompt.occupation) % 4
                for i in range(count):
                    rows.append(
                        {
                            "model_id": model,
                            "prompt_set": prompt.family,
                            "language": prompt.language,
                            "variant": prompt.variant,
                            "category": prompt.category,
                            "occupation": prompt.occupation,
                            "label": pattern[(i + shift + len(prompt.occupation)) % 6],
                        }
                    )
    return pd.DataFrame(rows)


def test_real_prompt_sets_counted_per_category(real_labels):
    table = category_distribution(real_labels)
    # 2 models x (magbig en, magbig de, bafis de) x 6 categories
    assert len(table) == 2 * 3 * 6
    expected = Counter(
        (r.model_id, r.prompt_set, r.language, r.variant, r.category, r.label)
        for r in real_labels.itertuples()
    )
    for row in table.to_dict("records"):
        key = (row["model_id"], row["prompt_set"], row["language"], row["variant"], row["category"])
        f, m, a = (expected[(*key, lab)] for lab in ("female", "male", "ambiguous"))
        assert (row["n_female"], row["n_male"], row["n_ambiguous"]) == (f, m, a)
        assert row["pct_female"] + row["pct_male"] + row["pct_ambiguous"] == pytest.approx(100)
        assert row["percent_female"] == pytest.approx(100 * f / (f + m))
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(wilson(f, f + m))


def test_official_comparison_per_language(real_labels, tmp_path: Path):
    de_file = tmp_path / "de.csv"
    de_file.write_text(
        "category,percent_female,source,year,country\n"
        "Healthcare & Social Services,76.0,BA test,2024,DE\n"
        "Technical & Engineering,24.0,BA test,2024,DE\n",
        encoding="utf-8",
    )
    cmap = load_categories()
    official = official_table(
        {
            "en": load_official_stats("builtin:labor_stats_us_bls2024_pst.csv"),
            "de": load_official_stats(str(de_file)),
        },
        cmap,
    )
    table = category_distribution(real_labels, official)
    tech_de = table[(table.language == "de") & (table.category == "Technical & Engineering")]
    assert set(tech_de["official_pf"]) == {24.0} and set(tech_de["official_country"]) == {"DE"}
    assert list(tech_de["gap_pp"]) == pytest.approx(list(tech_de["percent_female"] - 24.0))
    office_de = table[(table.language == "de") & (table.category == "Administration & Office")]
    assert office_de["official_pf"].isna().all() and office_de["gap_pp"].isna().all()
    office_en = table[(table.language == "en") & (table.category == "Administration & Office")]
    # US: clerk 84.3, executive assistant (BLS secretary) 92.5, receptionist 90.3
    assert list(office_en["official_pf"]) == pytest.approx([(84.3 + 92.5 + 90.3) / 3] * 2)


def test_uncategorised_images_are_counted_not_silently_lost():
    labels = pd.DataFrame(
        {
            "model_id": ["m"] * 3,
            "language": ["en"] * 3,
            "variant": ["direct"] * 3,
            "category": ["Business & Management", None, None],
            "label": ["female", "male", "male"],
        }
    )
    table = category_distribution(labels)
    assert len(table) == 1 and table.attrs["uncategorised"] == 2


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda f: f.drop(columns=["variant"]), r"lack the column\(s\) variant"),
        (lambda f: f.assign(label=["female", "no_face"]), r"'no_face' are not female, male"),
        (lambda f: f.assign(model_id=[None, "m"]), r"empty model_id"),
    ],
)
def test_bad_label_frames(change, match):
    labels = pd.DataFrame(
        {
            "model_id": ["m", "m"],
            "language": ["en"] * 2,
            "variant": ["d"] * 2,
            "category": ["C", "C"],
            "label": ["female", "male"],
        }
    )
    with pytest.raises(CorpusAuditError, match=match):
        category_distribution(change(labels))


def test_category_bars_figure(real_labels, tmp_path: Path):
    from PIL import Image

    official = official_table(
        {"de": load_official_stats("builtin:labor_stats_us_bls2024_pst.csv")}, load_categories()
    )
    table = category_distribution(real_labels, official)
    fig = category_bars(table, "de")
    assert len(fig.axes) == 2  # the direct and groups variants of the German prompts
    rendered = save(fig, "categories_de", "t", "c", tmp_path)
    assert rendered.png_path.is_file() and rendered.svg_path.is_file()
    with Image.open(io.BytesIO(rendered.png)) as im:
        assert im.size[0] > 400 and im.size[1] > 400
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 50  # bars, text, lines: not blank
