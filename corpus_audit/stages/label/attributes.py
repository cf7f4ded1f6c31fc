"""Perceived age and skin tone in the ``label`` stage (``label.age``, ``label.skin_tone``).

For every image the face filter kept, the label worker estimates the perceived age of the
kept face (:mod:`corpus_audit.backends.attributes`, binned by
:mod:`corpus_audit.methods.age_bins`) and measures its perceived skin tone
(:func:`corpus_audit.methods.skin_tone.measure_skin` on the dlib 5-point landmarks of
:mod:`corpus_audit.backends.landmarks`). For an image the filter dropped for its faces
(:data:`DROPPED_REASONS`) it writes a ``skin_tone`` row with status ``unmeasurable``, the
filter's reason and the image's mean L* (``image_l_star``), so that the drop-out by
lightness can be reported. Rows go to ``perceived_age`` and ``skin_tone``
(sql/schema/009_label.sql) in the batch's transaction; an image gets each row once (the
pending query asks only for images lacking them), so a study labelled before gains them on
its next ``label`` run without the gender classifier running again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from corpus_audit.backends.attributes import age_model_id
from corpus_audit.core.attrs import attrs_dict
from corpus_audit.core.store import StageRun, Study
from corpus_audit.methods.skin_tone import METHOD as SKIN_METHOD

# face filter reasons whose images still get a skin_tone row (image_l_star only)
DROPPED_REASONS = ("no_face", "many_faces", "small_face")
ATTRIBUTE_TABLES = ("perceived_age", "skin_tone")

AGE_COLUMNS = (
    "image_id", "model", "expected_age", "age_bin", "age_group", "minor", "p_bins", "probs",
)  # fmt: skip
SKIN_COLUMNS = (
    "image_id", "method", "status", "reason", "n_pixels", "l_star", "a_star", "b_star",
    "hue_deg", "ita_deg", "flags", "image_l_star",
)  # fmt: skip


def _insert_sql(table: str, columns: tuple[str, ...]) -> str:
    """One INSERT of a whole batch: each column bound as one list parameter and unnested
    side by side (DuckDB's executemany is one statement per row: ~5 ms a row here)."""
    names = ", ".join(columns)
    values = ", ".join(f"unnest(${c})" for c in columns)
    return f"INSERT INTO {table} ({names}) SELECT {values}"  # noqa: S608 (fixed names)


AGE_INSERT = _insert_sql("perceived_age", AGE_COLUMNS)
SKIN_INSERT = _insert_sql("skin_tone", SKIN_COLUMNS)


@dataclass(frozen=True)
class AttributeSettings:
    """What the attribute step does: ``age`` / ``skin`` on or off, ``min_pixels`` (>= 1)
    skin pixels a measurement needs, and the ids its rows get (``age_model``: '' when off)."""

    age: bool
    skin: bool
    min_pixels: int
    age_model: str
    skin_method: str = SKIN_METHOD
    age_precision: str = "int8"

    @classmethod
    def from_config(cls, cfg: Any) -> AttributeSettings:
        """From a ``[label]`` section; the age model's id is read from its manifest."""
        age = bool(getattr(cfg, "age", False))
        precision = str(getattr(cfg, "age_precision", "int8"))
        model = ""
        if age:
            model = age_model_id(precision)
        return cls(
            age,
            bool(getattr(cfg, "skin_tone", False)),
            int(getattr(cfg, "skin_min_pixels", 200)),
            model,
            age_precision=precision,
        )

    @property
    def on(self) -> bool:
        return self.age or self.skin

    def query_params(self) -> dict[str, Any]:
        """The pending query's parameters (``sql/label/pending.sql``)."""
        return {
            **attrs_dict(self, "age", "skin", "age_model", "skin_method"),
            "dropped_reasons": list(DROPPED_REASONS),
        }


def write_rows(con: Any, ages: list[tuple], skins: list[tuple]) -> None:
    """Insert the rows (inside the caller's transaction), one statement per table."""
    tables = ((ages, AGE_INSERT, AGE_COLUMNS), (skins, SKIN_INSERT, SKIN_COLUMNS))
    for rows, sql, columns in tables:
        if rows:
            values = zip(*rows, strict=True)
            con.execute(sql, {c: list(v) for c, v in zip(columns, values, strict=True)})


def prepare_attributes(study: Study, run: StageRun, attrs: AttributeSettings) -> list[str]:
    """Record the attribute settings in the run's provenance; when ``label.skin_min_pixels``
    differs from the one the last run recorded, remove the skin rows of the kept faces (one
    transaction) so they are measured again. Returns the notes to print."""
    now = {
        "age": attrs.age,
        "age_precision": attrs.age_precision,
        "skin_tone": attrs.skin,
        "skin_min_pixels": attrs.min_pixels,
    }
    run.provenance["attribute_settings"] = now
    last = study.last_run("label") or {}
    before = (last.get("provenance") or {}).get("attribute_settings") or {}
    notes = []
    was = before.get("age_precision", "fp32" if "age" in before else None)
    if attrs.age and was is not None and was != attrs.age_precision:
        notes.append(
            f"label.age_precision {was} -> {attrs.age_precision}: the kept faces' perceived age "
            f"is estimated again ({attrs.age_model}); the rows of the other model are kept and "
            "analyze reads this one"
        )
    old = before.get("skin_min_pixels")
    if not attrs.skin or old is None or old == attrs.min_pixels:
        return notes
    with study.transaction() as con:
        con.execute(
            "DELETE FROM skin_tone WHERE method = ? AND image_id IN "
            "(SELECT image_id FROM face_filter WHERE kept)",
            [attrs.skin_method],
        )
    return notes + [
        f"label.skin_min_pixels {old} -> {attrs.min_pixels}: the kept faces' skin tone is measured again"
    ]


def attribute_notes(pending: list[Any]) -> list[str]:
    """Why images already labelled are worked on again: they lack attribute rows (a study
    labelled before perceived age / skin tone existed, or with them off)."""
    only = [
        p
        for p in pending
        if p.filtered and (p.labelled or p.kept_face is None) and (p.needs_age or p.needs_skin)
    ]
    if not only:
        return []
    ages = sum(p.needs_age and p.kept_face is not None for p in only)
    skins = sum(p.needs_skin for p in only)
    return [
        f"{len(only)} images filtered before lack perceived-attribute rows ({ages} perceived "
        f"age, {skins} skin tone): measured now; their face filter results and gender labels "
        "are kept (no detector or classifier run for them)"
    ]


def attribute_summary(study: Study, attrs: AttributeSettings) -> list[str]:
    """One line: the perceived age and skin tone rows the study holds now."""
    parts = []
    if attrs.age:
        n, minors = study.con.execute(
            "SELECT count(*), count(*) FILTER (WHERE minor) FROM perceived_age WHERE model = ?",
            [attrs.age_model],
        ).fetchone()
        parts.append(f"perceived age of {n} images ({minors} perceived as under 16, counted apart)")
    if attrs.skin:
        n, measured = study.con.execute(
            "SELECT count(*), count(*) FILTER (WHERE status = 'measured') FROM skin_tone "
            "WHERE method = ?",
            [attrs.skin_method],
        ).fetchone()
        parts.append(f"skin tone rows of {n} images ({measured} measured, {attrs.skin_method})")
    return ["; ".join(parts)] if parts else []
