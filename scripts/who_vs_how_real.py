"""The who-and-how method on the bundled real captions (the numbers in docs/who_vs_how.md).

Usage (from the project root, with the shared data in ../shared/data)::

    .venv/bin/python scripts/who_vs_how_real.py [--data ../shared/data] [--no-names]
                                                  [--occupations 6] [--words 8] [--out DIR]

What it does:

1. a temporary study of the three real corpora (LAION 10 k sample, COCO val2017 captions,
   CC3M validation captions: 50,847 captions) runs the ``select`` and ``indicators`` stages
   (``--no-names`` skips spaCy NER; the labels then come from gender words and pronouns);
2. association of every caption (all 50 k, and the occupation captions of ``mentions``),
   with its agreement against the explicit-indicator labels;
3. who: % women per occupation among associated captions and among indicator-labelled
   captions vs the BLS table, occupations per decile (``--out`` writes the figures);
4. how: calibrated marked words per occupation between female- and male-indicated
   captions (gender words, pronouns and honorifics removed: they decide the label), and
   pooled over all captions;
5. SRBS, pooled over all 50 k captions: candidates = marked words of the captions
   *associated* (pronouns) with women / men, targets = marked words of the captions whose
   gender a gender *word* specifies (woman, man, girl, ...); per-word scores compared
   with Welch's t-test.

Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]

CORPORA = (
    "laion400m_sample_10k.parquet",
    "coco_val2017_captions.parquet",
    "cc3m_val_captions.parquet",
)


def md(frame: pd.DataFrame, floatfmt: str = ".2f") -> str:
    """A Markdown table (no extra dependency)."""
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = []
        for v in row:
            if isinstance(v, float):
                cells.append("" if np.isnan(v) else format(v, floatfmt))
            else:
                cells.append(str(v).replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def all_captions(data: Path) -> list[str | None]:
    import pyarrow.parquet as pq

    texts: list[str | None] = []
    for name in CORPORA:
        table = pq.read_table(data / name)
        column = "TEXT" if "TEXT" in table.column_names else "caption"
        texts += table.column(column).to_pylist()
    return texts


def occupation_rows(data: Path, use_names: bool) -> pd.DataFrame:
    """(caption_id, occupation, text, indicator label) from a study's select + indicators."""
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.stages.indicators import indicators
    from corpus_audit.stages.select import select

    with tempfile.TemporaryDirectory(prefix="who_vs_how_") as tmp:
        study = init_study(
            Path(tmp) / "study",
            [str(data / n) for n in CORPORA],
            overrides={"indicators": {"use_names": use_names}},
        )
        try:
            select(study, progress=False)
            indicators(study, progress=False)
            return study.con.execute(
                "SELECT m.caption_id, m.occupation, c.text, i.label "
                "FROM mentions m JOIN captions c USING (caption_id) "
                "JOIN indicators i USING (caption_id) ORDER BY m.caption_id, m.occupation"
            ).df()
        finally:
            study.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--no-names", action="store_true", help="indicators without spaCy NER")
    ap.add_argument("--occupations", type=int, default=6, help="occupations to show")
    ap.add_argument("--words", type=int, default=8, help="marked words per side to show")
    ap.add_argument("--out", type=Path, help="write the figures here (PNG + SVG)")
    args = ap.parse_args(argv)

    from corpus_audit.methods.gender_text import WordMatcher, clean_markup, label_of
    from corpus_audit.methods.lexicon import (
        GenderTerms,
        load_association_terms,
        load_gender_terms,
        load_labor_stats,
    )
    from corpus_audit.methods.texts import (
        MarkedWordsSettings,
        agreement,
        associate,
        decile_counts,
        element_scores,
        embed_words,
        marked_words,
        percent_women,
        welch,
    )
    from corpus_audit.methods.texts.mentions import occupation_words

    gender_terms = load_gender_terms()
    gender_words = [w for g in ("female", "male") for w in gender_terms.words[g]]
    # removed before counting: pronouns and honorifics, the gender words (they decide the
    # labels compared) and the occupations' own names
    drop = [*load_association_terms().words(), *gender_words, *occupation_words()]
    labor = load_labor_stats()

    # -- association of all captions, agreement with indicators (words + pronouns) -----------
    texts = all_captions(args.data)
    assoc = associate(texts)
    words_only = GenderTerms(gender_terms.words, {"male": (), "female": ()}, {})
    for name, terms in (("words + pronouns", gender_terms), ("gender words only", words_only)):
        matcher = WordMatcher(terms)
        spec = [label_of(t) for t in matcher.match(clean_markup(texts))]
        print(f"\n### Agreement on all {len(texts):,} captions, indicator = {name}\n")
        print(md(agreement(assoc["association"], spec, genders=("female", "male")), ".1f"))
    print("\nassociation of all captions:", assoc["association"].value_counts().to_dict())

    # -- occupation captions: who ---------------------------------------------------------
    rows = occupation_rows(args.data, use_names=not args.no_names)
    occ_assoc = associate(rows["text"])
    rows["association"] = occ_assoc["association"].to_numpy()
    print(f"\n{len(rows):,} (caption, occupation) rows, {rows['caption_id'].nunique():,} captions")
    print("association:", rows["association"].value_counts().to_dict())
    print("indicator:", rows["label"].value_counts().to_dict())
    print("\n### Agreement, occupation captions (indicator stage labels)\n")
    print(md(agreement(rows["association"], rows["label"], genders=("female", "male")), ".1f"))
    for label_col, what in (("association", "associated"), ("label", "indicator-labelled")):
        who = percent_women(rows["occupation"], rows[label_col], labor)
        shown = who[who["labor_pct_women"].notna() & (who["associated"] > 0)]
        print(f"\n### Who: % women among {what} occupation captions vs BLS\n")
        cols = ["occupation", "associated", "female", "male", "pct_women", "ci_low", "ci_high"]
        print(md(shown[[*cols, "labor_pct_women", "labor_dominated"]], ".1f"))
        deciles = decile_counts(who, min_associated=10)
        print(f"\ndeciles ({what}, >= 10 per occupation):")
        print(md(deciles, ".0f"))
        if args.out:
            from corpus_audit.report.figures import save
            from corpus_audit.report.who_how_figures import decile_figure, who_scatter

            tag = "associated" if label_col == "association" else "indicated"
            save(decile_figure(deciles, f"{what} captions"), f"deciles_{tag}", "", "", args.out)
            save(who_scatter(who, 10, f"{what} captions"), f"who_{tag}", "", "", args.out)

    # -- how: marked words per occupation, indicator labels -------------------------------
    mw = marked_words(
        rows["occupation"],
        rows["text"],
        rows["label"],
        text_ids=rows["caption_id"],
        drop_words=drop,
    )
    summary = mw.summary.sort_values(["texts_female", "occupation"], ascending=[False, True])
    print("\n### How: marked words per occupation (female- vs male-indicated captions)\n")
    print(md(summary.head(args.occupations * 2), ".0f"))
    # every word with its z (threshold ~0), to show the strongest where none is significant
    strongest = marked_words(
        rows["occupation"],
        rows["text"],
        rows["label"],
        drop_words=drop,
        settings=MarkedWordsSettings(z_threshold=1e-9),
    ).words
    for occ in summary["occupation"].head(args.occupations):
        print(f"\n#### {occ} (strongest words; * = |z| > 1.96)\n")
        print(side_by_side(strongest[strongest["occupation"] == occ], args.words))
    pooled = marked_words(["all"] * len(rows), rows["text"], rows["label"], drop_words=drop)
    print("\n#### all occupation captions pooled\n")
    print(md(pooled.summary, ".0f"))
    print(side_by_side(pooled.words, args.words))

    # -- all 50 k captions: marked words of specified vs associated, SRBS -----------------
    matcher = WordMatcher(words_only)
    spec_words = [label_of(t) for t in matcher.match(clean_markup(texts))]
    everything = ["all"] * len(texts)
    targets = marked_words(everything, texts, spec_words, drop_words=drop)
    candidates = marked_words(everything, texts, assoc["association"], drop_words=drop)
    print("\n### All captions: marked words, female vs male specified by a gender word\n")
    print(md(targets.summary, ".0f"))
    print(side_by_side(targets.words, args.words * 2))
    print("\n### All captions: marked words, associated with women vs men (pronouns)\n")
    print(md(candidates.summary, ".0f"))
    print(side_by_side(candidates.words, args.words * 2))
    vocab = pd.concat([targets.words["word"], candidates.words["word"]]).unique().tolist()
    vectors = embed_words(vocab)

    def stack(frame: pd.DataFrame, side: str) -> np.ndarray:
        return np.stack([vectors[w] for w in frame.loc[frame["side"] == side, "word"]])

    t_f, t_m = stack(targets.words, "female"), stack(targets.words, "male")
    scores = {
        side: element_scores(stack(candidates.words, side), t_f, t_m) for side in ("female", "male")
    }
    print("\n### SRBS (SBERT all-MiniLM-L6-v2), per-word scores, Welch's t-test\n")
    print(md(welch(scores["female"], scores["male"], unit="word"), ".4g"))
    return 0


def side_by_side(words: pd.DataFrame, k: int) -> str:
    """The top ``k`` marked words of each side as one Markdown table."""
    parts = []
    for side in ("female", "male"):
        top = words[words["side"] == side].head(k)
        parts.append(
            [
                f"{r.word}{'*' if abs(r.z) > 1.96 else ''} ({r.z:+.2f}; "
                f"{r.count_female}/{r.count_male})"
                for r in top.itertuples()
            ]
        )
    depth = max((len(p) for p in parts), default=0)
    female, male = (p + [""] * (depth - len(p)) for p in parts)
    frame = pd.DataFrame(
        {"women's side: word (z; count f/m)": female, "men's side: word (z; count f/m)": male}
    )
    return md(frame) if depth else "(no marked words)"


if __name__ == "__main__":
    raise SystemExit(main())
