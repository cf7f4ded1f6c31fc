"""%female per training subset and per generated set, from the labels of filtered images.

%female = 100 x female / (female + male) over the images of a set that passed the face
filter and got a confident label (METHODS 1.4); ``ambiguous`` labels and dropped images count
in ``n_images`` only. A training subset is taken after the cut (:mod:`corpus_audit.tables.subsets`:
with ``select.sample_unit = "labelled_images"`` its first N captions with a labelled image).
Every %female carries a Wilson interval. The SQL is in ``corpus_audit/sql/analysis_*.sql``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corpus_audit.core.store import Study, dicts
from corpus_audit.methods.amplification import Rate
from corpus_audit.methods.stats import percent, wilson_interval

TRAINING = "training"
GENERATED = "generated"
CAPTION_PROMPTS_TEMPLATE = 0  # template_id of captions-as-prompts rows


@dataclass(frozen=True)
class ImageSet:
    """Counts of one training subset or generated set (a row of ``percent_female``)."""

    side: str  # training | generated
    occupation: str
    n_images: int  # registered images of the set (before filters)
    n_female: int
    n_male: int
    model_id: str | None = None
    strategy: str | None = None
    prompt_id: str | None = None
    template_id: int | None = None
    n_captions: int | None = None  # training subsets and caption-prompt sets: captions in it
    n_target: int | None = None  # training subsets: the N it is cut at (None: split)
    n_candidates: int | None = None  # training subsets: ranked candidate captions
    shortfall: str | None = None  # training subsets short of N: pending | candidates | corpus

    @property
    def n(self) -> int:
        """Labelled images (female + male)."""
        return self.n_female + self.n_male

    @property
    def percent_female(self) -> float | None:
        """%female in [0, 100], None without labelled images."""
        return percent(self.n_female, self.n)

    @property
    def key(self) -> tuple:
        """Identity of the set (for sharing bootstrap draws)."""
        return (
            self.side,
            self.model_id,
            self.strategy,
            self.occupation,
            self.prompt_id,
            self.template_id,
        )

    @classmethod
    def from_row(
        cls, side: str, row: dict[str, Any], counts: str = "n_", **fields: Any
    ) -> ImageSet:
        """A set from a query row: its ``occupation`` (unless ``fields`` gives one), the counts
        ``<counts>images``, ``<counts>female``, ``<counts>male`` and the other ``fields``."""
        fields.setdefault("occupation", row["occupation"])
        return cls(
            side,
            n_images=row[f"{counts}images"],
            n_female=row[f"{counts}female"],
            n_male=row[f"{counts}male"],
            **fields,
        )

    def rate(self) -> Rate:
        return Rate(self.key, self.percent_female, self.n)

    def row(self, confidence: float) -> dict:
        """The ``percent_female`` table row."""
        lo, hi = wilson_interval(self.n_female, self.n, confidence)
        return {
            "side": self.side,
            "model_id": self.model_id,
            "strategy": self.strategy,
            "occupation": self.occupation,
            "prompt_id": self.prompt_id,
            "template_id": self.template_id,
            "n_female": self.n_female,
            "n_male": self.n_male,
            "percent_female": self.percent_female,
            "ci_low": lo,
            "ci_high": hi,
            "n_images": self.n_images,
            "n_captions": self.n_captions,
            "n_target": self.n_target,
            "n_candidates": self.n_candidates,
            "shortfall": self.shortfall,
        }


def training_sets(study: Study, shortfall: dict[tuple, str | None] | None = None) -> list[ImageSet]:
    """Counts per training subset after the cut (needs :func:`prepare_labels` and
    :func:`corpus_audit.tables.subsets.cut` first); ``shortfall`` maps (strategy, occupation,
    prompt_id) to why a subset holds fewer than N."""
    short = shortfall or {}
    return [
        ImageSet.from_row(
            TRAINING,
            r,
            **{k: r[k] for k in _TRAINING_FIELDS},
            shortfall=short.get((r["strategy"], r["occupation"], r["prompt_id"])),
        )
        for r in dicts(study.sql("analyze/percent_training"))
    ]


_TRAINING_FIELDS = (
    "strategy",
    "prompt_id",
    "template_id",
    "n_captions",
    "n_target",
    "n_candidates",
)


def generated_sets(study: Study) -> list[ImageSet]:
    """Counts per generated set (model, prompt) (needs :func:`prepare_labels` first)."""
    return [
        ImageSet.from_row(
            GENERATED,
            r,
            occupation=r["occupation"] or "",
            model_id=r["model_id"],
            prompt_id=r["prompt_id"],
            template_id=r["template_id"],
        )
        for r in dicts(study.sql("analyze/percent_generated"))
    ]


def caption_prompt_sets(study: Study) -> list[tuple[ImageSet, ImageSet]]:
    """(training, generated) counts per (model, caption subset, occupation) for captions used
    as prompts, both over the same captions: those with a labelled training image and
    generated images (needs :func:`prepare_labels` and the cut first)."""
    out = []
    for r in dicts(study.sql("analyze/caption_prompts")):
        common = {
            "model_id": r["model_id"],
            "strategy": r["strategy"],
            "template_id": CAPTION_PROMPTS_TEMPLATE,
            "n_captions": r["n_captions"],
        }
        training = ImageSet.from_row(TRAINING, r, "train_", **common)
        out.append((training, ImageSet.from_row(GENERATED, r, "gen_", **common)))
    return out


def indicator_match_rows(study: Study, confidence: float) -> list[dict]:
    """Captions with a one-sided indicator (male or female) used as prompts: per model, prompt
    kind (caption | paraphrase), reference and group (male, female, any), the labelled
    generated images and the share whose perceived gender matches the reference, with a
    Wilson interval. Two references: ``indicator`` (the caption's indicator; group = the
    indicator) and ``training_image`` (the paper's: the perceived gender of the caption's own
    training image, for captions whose training image is labelled; group = that label)."""
    rows = dicts(study.sql("analyze/indicator_match"))
    out: list[dict] = []
    for model, kind, reference in sorted(
        {(r["model_id"], r["kind"], r["reference"]) for r in rows}
    ):
        mine = [
            r
            for r in rows
            if r["model_id"] == model and r["kind"] == kind and r["reference"] == reference
        ]
        total = {
            "indicator": "any",
            "n_images": sum(r["n_images"] for r in mine),
            "n_match": sum(r["n_match"] for r in mine),
        }
        for r in [*mine, total]:
            lo, hi = wilson_interval(r["n_match"], r["n_images"], confidence)
            out.append(
                {
                    "model_id": model,
                    "kind": kind,
                    "reference": reference,
                    "indicator": r["indicator"],
                    "n_images": r["n_images"],
                    "n_match": r["n_match"],
                    "percent_match": percent(r["n_match"], r["n_images"]),
                    "ci_low": lo,
                    "ci_high": hi,
                }
            )
    return out


def occupation_indicator_rows(study: Study, strategy: str = "keyword") -> list[dict]:
    """Per occupation: caption-side indicator shares and, where training images are labelled,
    the image-side shares (rows of ``occupation_indicators``)."""
    captions = {r["occupation"]: r for r in dicts(study.sql("analyze/occupation_indicators"))}
    images = {
        r["occupation"]: r for r in dicts(study.sql("analyze/image_indicators", strategy=strategy))
    }
    out = []
    for occ in sorted(set(captions) | set(images)):
        c = captions.get(occ) or {
            "n_captions": 0,
            "n_checked": 0,
            "n_male": 0,
            "n_female": 0,
            "n_both": 0,
            "n_none": 0,
        }
        i = images.get(occ)
        checked = c["n_checked"]
        row = {
            "occupation": occ,
            "n_captions": c["n_captions"],
            "n_checked": checked,
            "n_male": c["n_male"],
            "n_female": c["n_female"],
            "n_both": c["n_both"],
            "n_none": c["n_none"],
            "pct_any": percent(c["n_male"] + c["n_female"] + c["n_both"], checked),
            "pct_male": percent(c["n_male"], checked),
            "pct_female": percent(c["n_female"], checked),
            "pct_both": percent(c["n_both"], checked),
            "n_female_images": None,
            "n_male_images": None,
            "pct_marked_female_images": None,
            "pct_marked_male_images": None,
            "training_pf": None,
            "pct_female_indicator": None,
        }
        if i is not None:
            labelled = i["n_female_images"] + i["n_male_images"]
            row.update(
                {
                    "n_female_images": i["n_female_images"],
                    "n_male_images": i["n_male_images"],
                    "pct_marked_female_images": percent(i["n_female_marked"], i["n_female_images"])
                    if i["n_checked_images"]
                    else None,
                    "pct_marked_male_images": percent(i["n_male_marked"], i["n_male_images"])
                    if i["n_checked_images"]
                    else None,
                    "training_pf": percent(i["n_female_images"], labelled),
                    "pct_female_indicator": percent(i["n_female_indicator"], i["n_checked_images"]),
                }
            )
        out.append(row)
    return out
