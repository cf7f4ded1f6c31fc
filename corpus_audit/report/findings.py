"""The report's frame: what the study found, section by section, in the order of what it holds.

Each section builder returns a :class:`Section`: its data, its findings (one sentence each,
numbers with their intervals, level and method named) and, when it has no data, the one line
saying why (``empty``). :func:`findings_context` orders the sections by what the study holds
(sections with data first; a model-only study's generated %female before everything) and
gathers their sentences into the findings summary the page opens with. The template renders a
section without data as its ``empty`` line only: no table of dashes, no empty figure.

Builders read the context :func:`corpus_audit.report.context.build_context` made (plain data)
and, for the model-only table, the study; they never format HTML.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from corpus_audit.core.store import Study, dicts
from corpus_audit.methods.stats import wilson_interval

#: the most per-occupation sentences the summary shows per model (the table holds them all)
SKEWED_SHOWN = 2


@dataclass
class Section:
    """One report section: ``key`` (its anchor), ``title``, ``data`` (what the template shows),
    ``findings`` (sentences for the summary) and ``empty`` (why it has no data; None: it has)."""

    key: str
    title: str
    data: Any = None
    findings: list[str] = field(default_factory=list)
    empty: str | None = None

    @property
    def has_data(self) -> bool:
        return self.empty is None


def _level(confidence: float) -> str:
    return f"{confidence * 100:g} %"


def _interval(low: float | None, high: float | None, digits: int = 0, sign: bool = False) -> str:
    if low is None or high is None:
        return ""
    fmt = f"{{:{'+' if sign else ''}.{digits}f}}"
    return f"[{fmt.format(low)}, {fmt.format(high)}]"


# -- amplification ----------------------------------------------------------------------------
def amplification_section(ctx: dict[str, Any], kind: str) -> Section:
    """Per model the mean amplification per strategy (the table's average column) with its
    bootstrap interval; empty when no cell has a mean (no images, or every pair excluded)."""
    section = Section("results", "Amplification by selection strategy", ctx["results"])
    confidence = float(ctx["analysis"]["provenance"].get("confidence", 0.95))
    blocks = ctx["results"]["blocks"]
    if kind == "images":
        section.empty = (
            "not measured (a model-only study has no training images to compare the generated "
            "ones with)"
        )
        return section
    if not blocks:
        section.empty = (
            "not measured (it needs training and generated images with perceived-gender "
            "labels; this study has "
            + ("none" if not ctx["image_funnel"] else "no labelled pair of them")
            + ")"
        )
        return section
    if not amplification_measured(ctx["results"]):
        section.empty = (
            "not measured (every occupation and prompt was excluded: training and generated "
            "%female on different sides of 50, or a side without labelled images)"
        )
        return section
    columns = ctx["results"]["columns"]
    avg = columns.index("average")
    for block in blocks:
        parts = []
        for row in block["rows"]:
            cell = row["cells"][avg]
            if cell and cell["text"] != "all excluded":
                parts.append(f"{row['strategy']} {cell['text']} pp {cell['ci']}".rstrip())
        if parts:
            section.findings.append(
                f"{block['model']}: mean amplification over prompts and occupations, "
                f"{_level(confidence)} bootstrap intervals: " + "; ".join(parts) + "."
            )
    return section


def amplification_measured(results: dict[str, Any]) -> bool:
    """Whether some cell of the amplification table (``results`` of the context) has a mean
    (not empty, not "all excluded")."""
    cells = [c for b in results["blocks"] for r in b["rows"] for c in r["cells"] if c]
    return any(c["text"] != "all excluded" for c in cells)


# -- model-only: generated %female against the labour statistics ------------------------------
def generated_section(study: Study, ctx: dict[str, Any]) -> Section:
    """The ``generated_gender`` table (per model, occupation and prompt) with the labour
    statistic beside it; findings per model: %female pooled over its labelled images, the most
    and least skewed occupations, the images dropped and why."""
    section = Section("generated", "Generated %female against the labour statistics")
    confidence = float(ctx["analysis"]["provenance"].get("confidence", 0.95))
    if not study.table_exists("generated_gender") or not study.count("generated_gender"):
        section.empty = "no generated or imported image has been analyzed yet"
        return section
    rows = dicts(
        study.con.execute(
            "SELECT * FROM generated_gender ORDER BY model_id, occupation, language, "
            "prompt_id NULLS FIRST"
        )
    )
    sources = sorted({r["labour_source"] for r in rows if r["labour_source"]})
    for r in rows:  # the labour statistic's source as a note number (listed under the table)
        r["source_ref"] = sources.index(r["labour_source"]) + 1 if r["labour_source"] else None
    section.data = {
        "rows": rows,
        "sources": sources,
        "level": _level(confidence),
        "drops": ctx["image_funnel"],
    }
    reasons = _drop_reasons(study)
    for model in sorted({r["model_id"] for r in rows}):
        pooled = [r for r in rows if r["model_id"] == model and r["prompt_id"] is None]
        section.findings += _model_findings(model, pooled, reasons.get(model), confidence)
    return section


def _model_findings(
    model: str, pooled: list[dict], reasons: list[tuple[str, int]] | None, confidence: float
) -> list[str]:
    """One model's findings from its pooled ``generated_gender`` rows: %female with its
    interval against the labour statistics, the most and least skewed occupations, and the
    images dropped (``reasons``: the face filter's, with counts) or ambiguous."""
    female = sum(r["n_female"] for r in pooled)
    male = sum(r["n_male"] for r in pooled)
    n = sum(r["n_images"] for r in pooled)
    if female + male:
        low, high = wilson_interval(female, female + male, confidence)
        pf = 100.0 * female / (female + male)
        head = (
            f"{model}: {pf:.0f} % female {_interval(low, high)} ({_level(confidence)} "
            f"Wilson) over {female + male} labelled images of {len(pooled)} occupation(s)"
        )
    else:
        head = f"{model}: no image labelled female or male among {n}"
    with_labour = [
        r
        for r in pooled
        if r["percent_female"] is not None and r["labour_percent_female"] is not None
    ]
    if with_labour:
        below = sum(r["percent_female"] < r["labour_percent_female"] for r in with_labour)
        head += (
            f"; below the labour statistics' % women in {below} of {len(with_labour)} occupations"
        )
    out = [head + "."]
    rated = sorted(
        (r for r in pooled if r["percent_female"] is not None),
        key=lambda r: (-abs(r["percent_female"] - 50.0), r["occupation"]),
    )
    if len(rated) >= 2:
        most, least = rated[: min(SKEWED_SHOWN, len(rated) - 1)], rated[-1]
        out.append(
            "Most skewed: "
            + ", ".join(_occupation_text(r) for r in most)
            + f"; least skewed: {_occupation_text(least)}."
        )
    why = " (" + ", ".join(f"{reason}: {k}" for reason, k in reasons) + ")" if reasons else ""
    dropped = sum(r["n_dropped"] for r in pooled)
    ambiguous = sum(r["n_ambiguous"] for r in pooled)
    out.append(
        f"Of {n} images, {dropped} dropped{why} and {ambiguous} ambiguous (labelled, "
        "neither side confident enough); %female counts female and male labels only."
    )
    return out


def _drop_reasons(study: Study) -> dict[str, list[tuple[str, int]]]:
    """Per model: the face filter's drop reasons of its generated (or imported) images with
    their counts, the most frequent first."""
    found = study.con.execute(
        "SELECT coalesce(i.model_id, 'unknown'), coalesce(f.reason, 'dropped'), count(*) AS n "
        "FROM images i JOIN face_filter f USING (image_id) "
        "WHERE i.source = 'generated' AND NOT f.kept GROUP BY ALL ORDER BY 1, n DESC, 2"
    ).fetchall()
    out: dict[str, list[tuple[str, int]]] = {}
    for model, reason, n in found:
        out.setdefault(model, []).append((reason, int(n)))
    return out


def _occupation_text(r: dict[str, Any]) -> str:
    labour = r["labour_percent_female"]
    beside = "no labour statistic" if labour is None else f"labour {labour:.0f} %"
    occ = r["occupation"] + ("" if r["language"] == "en" else f" ({r['language']})")
    return (
        f"{occ} {r['percent_female']:.0f} % {_interval(r['ci_low'], r['ci_high'])} "
        f"(n = {r['n_female'] + r['n_male']}; {beside})"
    )


# -- caption side -------------------------------------------------------------------------------
def indicators_findings(ctx: dict[str, Any], confidence: float) -> Section:
    """The indicator rates: the mean over occupations of each one's share and the pooled share
    with its Wilson interval; the columns that hold a value in some row (``data['columns']``)."""
    ind = ctx["indicators"]
    section = Section("captions", "Caption side", ind)
    if not ind["ran"]:
        section.empty = "the indicators stage has not run: no indicator labels"
        return section
    if not ind["rows"]:
        section.empty = "no caption names an occupation of the lexicon"
        return section
    overall = ind["overall"]
    if overall["checked"]:
        low, high = wilson_interval(overall["with_indicator"], overall["checked"], confidence)
        section.findings.append(
            f"Captions with an explicit gender indicator: {overall['mean_occupation_pct']:.1f} % "
            f"on average over {overall['occupations']} occupations; pooled "
            f"{overall['with_indicator']} of {overall['checked']} = {overall['pct']:.1f} % "
            f"{_interval(low, high, 1)} ({_level(confidence)} Wilson)."
        )
    corpus_sentence = _per_corpus_finding(ind.get("corpora") or [])
    if corpus_sentence:
        section.findings.append(corpus_sentence)
    similarity = ctx["similarity"]["summary"]
    if similarity:
        section.findings.append(
            "Mean caption-prompt cosine similarity (SBERT) of each strategy's subsets: "
            + ", ".join(
                f"{r['strategy']} {r['mean_similarity']:.3f}"
                for r in similarity
                if r["mean_similarity"] is not None
            )
            + "."
        )
    corr = ind["correlation"]
    if corr and corr.get("r") is not None:
        section.findings.append(
            f"Pearson r between training %female and the share of female indicators over "
            f"{corr['n_occupations']} occupations: {corr['r']:.3f} (p = {corr['p_value']:.2g})."
        )
    return section


def _per_corpus_finding(corpora: list[dict[str, Any]]) -> str | None:
    """One sentence when the study reads several corpus groups: each group's mean indicator
    share (0-100), the group the paper reported beside the paper's number, and the groups
    declared hypernymized; None for a single group (the pooled sentence says it all)."""
    groups = [
        c for c in corpora if not c.get("pooled") and c.get("mean_occupation_pct") is not None
    ]
    if len(groups) < 2:
        return None
    parts = []
    for c in groups:
        text = f"{c['corpus']} {c['mean_occupation_pct']:.1f} %"
        if c.get("paper_pct") is not None:
            text += f" (the paper: {c['paper_pct']:.1f} %)"
        if c.get("hypernymized"):
            text += " (hypernymized: names replaced, fewer indicators)"
        parts.append(text)
    return (
        "Per corpus, mean over occupations: " + ", ".join(parts) + "; the pooled share mixes "
        "them and is not the number to compare with the paper."
    )


def filled_columns(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    """The ``keys`` that hold a value (not None) in at least one row: a column that would be
    "–" in every row is dropped."""
    return [k for k in keys if any(r.get(k) is not None for r in rows)]


# -- who and how: repeated empty tables ---------------------------------------------------------
def split_word_groups(who_how: dict[str, Any]) -> None:
    """Mark the marked-words comparisons with no word past the threshold: ``word_groups`` keeps
    those with words, ``empty_word_groups`` names the others (shown as one line)."""
    if not who_how.get("ran"):
        return
    groups = who_how["groups"]
    who_how["word_groups"] = [g for g in groups if g["female"] or g["male"]]
    who_how["empty_word_groups"] = [
        (f"{g['model']} · " if g.get("model") else "")
        + f"{g['comparison']} · {g['occupation'] if g['occupation'] is not None else 'pooled'}"
        for g in groups
        if not (g["female"] or g["male"])
    ]
