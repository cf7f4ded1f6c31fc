"""The `variants` stage end to end on real COCO captions: caption 1 vs caption 2 of each image
as two text columns of one corpus (``[variants] columns``), then the comparison tables, the
CSVs and the report section, each checked against counts computed here independently:

- the image set comes from two real `select` runs (one per caption column: the stage's SQL
  matcher, not the stage's matcher call), the union of their mentions;
- labels come from the real indicator rules called here on the raw captions (and agree with
  the `indicators` stage's table for the captions it labelled);
- every count (transitions, mentions kept/gained/lost, rates, discordant images, McNemar p
  via scipy) is a plain loop over those inputs.

Plus: an existing study opens unchanged (new tables only, no stale note), bad input (missing
or non-text column, unknown baseline, bad variant name, NULL captions) is one line with exit 2
and leaves the study as it was.
"""

from __future__ import annotations

import io
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pandas as pd
import pytest
from scipy.stats import binomtest

from corpus_audit.cli import main
from corpus_audit.core.catalogue import stage
from corpus_audit.core.pipeline import init_study, status
from corpus_audit.core.store import Study

LABELS = ("male", "female", "both", "none")


def _cli(*args: str) -> SimpleNamespace:
    """The real command line, in this process (``returncode``, ``stdout``, ``stderr``)."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["-q", *args])
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def coco_wide(coco_path: Path, out: Path) -> pd.DataFrame:
    """One row per COCO image: its captions with the lowest and second-lowest caption_id."""
    coco = pd.read_parquet(coco_path, columns=["caption_id", "image_id", "caption", "coco_url"])
    coco = coco.sort_values(["image_id", "caption_id"], kind="stable")
    first = coco.groupby("image_id").nth(0).set_index("image_id")
    second = coco.groupby("image_id").nth(1).set_index("image_id")
    wide = pd.DataFrame(
        {
            "image_id": first.index,
            "caption1": first["caption"].to_numpy(),
            "caption2": second.loc[first.index, "caption"].to_numpy(),
            "url": first["coco_url"].to_numpy(),
        }
    )
    wide.to_parquet(out, index=False)
    return wide


def _settings(**variants) -> dict:
    return {
        "indicators": {"use_names": False},
        "variants": {"columns": {"caption2": "caption2"}, **variants},
        "corpus": {"text_column": "caption1"},
    }


@pytest.fixture(scope="module")
def coco(coco_path, tmp_path_factory):
    """The wide COCO file, a study comparing caption2 with caption1 (select, indicators,
    variants, report run through the CLI) and the expected values built independently."""
    root = tmp_path_factory.mktemp("variants")
    wide = coco_wide(coco_path, root / "coco.parquet")
    init_study(root / "study", [str(root / "coco.parquet")], overrides=_settings()).close()
    check = init_study(
        root / "check2",
        [str(root / "coco.parquet")],
        overrides={"corpus": {"text_column": "caption2"}},
    )
    check.close()
    for args in (("select", "study"), ("indicators", "study"), ("select", "check2")):
        done = _cli(*args[:1], str(root / args[1]))
        assert done.returncode == 0, done.stderr
    done = _cli("variants", str(root / "study"))
    assert done.returncode == 0, done.stderr
    report = _cli("report", str(root / "study"))
    assert report.returncode == 0, report.stderr
    return root, wide, done.stdout


def _mentions(db: Path) -> dict[int, set[str]]:
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT caption_id, occupation FROM mentions").fetchall()
    out: dict[int, set[str]] = {}
    for cid, occ in rows:
        out.setdefault(int(cid), set()).add(occ)
    return out


@pytest.fixture(scope="module")
def expected(coco):
    """Union set, texts, labels and mentions per variant, without the stage's code."""
    from corpus_audit.methods.gender_text import IndicatorTagger, WordMatcher
    from corpus_audit.methods.lexicon import load_gender_terms

    root, wide, _ = coco
    m1 = _mentions(root / "study" / "study.duckdb")  # select on caption1
    m2 = _mentions(root / "check2" / "study.duckdb")  # select on caption2
    ids = sorted(set(m1) | set(m2))  # file 0: caption_id is the row number
    text = {
        "original": {i: wide["caption1"].iloc[i] for i in ids},
        "caption2": {i: wide["caption2"].iloc[i] for i in ids},
    }
    tagger = IndicatorTagger(WordMatcher(load_gender_terms()))
    labels = {
        v: dict(zip(ids, tagger.tag([t[i] for i in ids]).labels, strict=True))
        for v, t in text.items()
    }
    mentions = {"original": m1, "caption2": m2}
    return ids, text, labels, mentions


def _table(root: Path, sql: str) -> pd.DataFrame:
    with duckdb.connect(str(root / "study" / "study.duckdb"), read_only=True) as con:
        return con.execute(sql).df()


def test_caption_variants_hold_the_union_of_both_selections(coco, expected):
    root, wide, _ = coco
    ids, text, labels, mentions = expected
    assert len(ids) == 24  # 10 images by caption 1, 17 by caption 2, 3 by both (docs)
    got = _table(root, "SELECT * FROM caption_variants ORDER BY variant, caption_id")
    for variant in ("original", "caption2"):
        rows = got[got["variant"] == variant]
        assert rows["caption_id"].tolist() == ids
        assert rows["text"].tolist() == [text[variant][i] for i in ids]
        assert rows["label"].tolist() == [labels[variant][i] for i in ids]
    assert set(got["source"]) == {"column:caption1", "column:caption2"}
    # the variant 'original' is what select and indicators hold for the rows they selected
    sel = _table(
        root,
        "SELECT c.caption_id, c.text, i.label FROM captions c JOIN indicators i USING "
        "(caption_id) ORDER BY caption_id",
    )
    orig = got[got["variant"] == "original"].set_index("caption_id")
    assert len(sel) == 10
    assert orig.loc[sel["caption_id"], "text"].tolist() == sel["text"].tolist()
    assert orig.loc[sel["caption_id"], "label"].tolist() == sel["label"].tolist()
    vm = _table(root, "SELECT variant, caption_id, occupation FROM variant_mentions")
    for variant in ("original", "caption2"):
        found = {
            (int(r.caption_id), r.occupation) for r in vm[vm["variant"] == variant].itertuples()
        }
        want = {(i, o) for i, occs in mentions[variant].items() for o in occs}
        assert found == want


def test_transitions_rates_and_mentions_match_plain_counts(coco, expected):
    root, _, _ = coco
    ids, _, labels, mentions = expected
    pairs = Counter((labels["original"][i], labels["caption2"][i]) for i in ids)
    trans = _table(root, "SELECT * FROM variant_transitions WHERE occupation IS NULL")
    assert len(trans) == 16 and set(trans["variant_b"]) == {"caption2"}
    for r in trans.itertuples():
        assert r.n_images == pairs.get((r.label_a, r.label_b), 0), r.transition
        assert r.pct_images == pytest.approx(100 * r.n_images / len(ids))
    changes = _table(root, "SELECT * FROM variant_image_changes")
    assert int(changes["changed"].sum()) == sum(n for (a, b), n in pairs.items() if a != b)
    rates = _table(root, "SELECT * FROM variant_rates WHERE occupation IS NULL")
    for r in rates.itertuples():
        counts = Counter(labels[r.variant].values())
        assert (r.n_captions, r.n_male_only, r.n_female_only, r.n_both, r.n_none) == (
            len(ids),
            *(counts.get(x, 0) for x in LABELS),
        )
    occs = sorted({o for m in mentions.values() for occ in m.values() for o in occ})
    mc = _table(root, "SELECT * FROM variant_mention_changes").set_index("occupation")
    for occ in occs:
        a = {i for i in ids if occ in mentions["original"].get(i, set())}
        b = {i for i in ids if occ in mentions["caption2"].get(i, set())}
        row = mc.loc[occ]
        assert (row.n_a, row.n_b, row.n_kept, row.n_gained, row.n_lost) == (
            len(a),
            len(b),
            len(a & b),
            len(b - a),
            len(a - b),
        )
    every = mc[mc.index.isna()].iloc[0]
    assert (every.n_a, every.n_b, every.n_kept) == (10, 17, 3)


def test_paired_differences_match_discordant_counts_and_mcnemar(coco, expected):
    root, _, _ = coco
    ids, _, labels, mentions = expected
    diffs = _table(root, "SELECT * FROM variant_differences WHERE occupation IS NULL").set_index(
        "metric"
    )
    outcomes = {
        "any_indicator": {"male", "female", "both"},
        "female_indicator": {"female", "both"},
        "male_indicator": {"male", "both"},
    }
    for metric, yes in outcomes.items():
        a = [labels["original"][i] in yes for i in ids]
        b = [labels["caption2"][i] in yes for i in ids]
        a_only = sum(x and not y for x, y in zip(a, b, strict=True))
        b_only = sum(y and not x for x, y in zip(a, b, strict=True))
        row = diffs.loc[metric]
        assert (row.n_images, row.n_a_only, row.n_b_only) == (len(ids), a_only, b_only)
        assert row.value_a == pytest.approx(100 * sum(a) / len(ids))
        assert row.difference == pytest.approx(100 * (sum(b) - sum(a)) / len(ids))
        p = binomtest(b_only, a_only + b_only, 0.5).pvalue if a_only + b_only else 1.0
        assert row.p_value == pytest.approx(p)
        assert row.ci_low <= row.difference <= row.ci_high
    row = diffs.loc["mentions"]  # mentions any occupation: 10 -> 17 of 24, 3 kept
    assert (row.n_a_only, row.n_b_only) == (7, 14)
    assert row.p_value == pytest.approx(binomtest(14, 21, 0.5).pvalue)
    sim = _table(root, "SELECT * FROM variant_similarity WHERE occupation IS NULL")
    per_occ = _table(root, "SELECT occupation, count(*) AS n FROM prompts GROUP BY ALL")
    n_prompts = dict(zip(per_occ["occupation"], per_occ["n"], strict=True))
    pairs = 0  # (image, occupation, prompt) rows: each occupation's set (union) x its prompts
    for occ, n in n_prompts.items():
        in_set = [i for i in ids if any(occ in m.get(i, set()) for m in mentions.values())]
        pairs += len(in_set) * n
    assert len(sim) == 2
    for r in sim.itertuples():
        assert r.n_images == len(ids) and r.n_pairs == pairs
        assert -1 <= r.q05 <= r.q50 <= r.q95 <= 1


def test_csvs_report_section_and_cli_summary(coco, expected):
    import html as html_lib

    root, _, _ = coco
    ids, _, labels, mentions = expected
    folder = root / "study" / "report" / "variants"
    for table in ("variant_differences", "variant_transitions", "variant_rates"):
        csv = pd.read_csv(folder / f"{table}.csv")
        db = _table(root, f"SELECT * FROM {table}")
        assert len(csv) == len(db) > 0 and list(csv.columns) == list(db.columns)
    html = (root / "study" / "report" / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<h2 id="variants">Caption variants</h2>') :]
    section = section[: section.index('<h2 id="occupations">')]
    assert "<h3>caption2 vs original</h3>" in section
    n = len(ids)
    rows = {  # the section's paired-difference rows, from labels and mentions counted here
        "any_indicator": {"male", "female", "both"},
        "female_indicator": {"female", "both"},
    }
    for metric, yes in rows.items():
        a = sum(labels["original"][i] in yes for i in ids)
        b = sum(labels["caption2"][i] in yes for i in ids)
        cells = f'<td>{metric}</td><td class="n">{n}</td><td class="n">{100 * a / n:.2f}</td>'
        assert cells + f'<td class="n">{100 * b / n:.2f}</td>' in section, metric
    a = sum(bool(mentions["original"].get(i)) for i in ids)
    b = sum(bool(mentions["caption2"].get(i)) for i in ids)
    kept = sum(bool(mentions["original"].get(i)) and bool(mentions["caption2"].get(i)) for i in ids)
    assert (
        f'<td>(any occupation)</td><td class="n">{a}</td><td class="n">{b}</td>'
        f'<td class="n">{kept}</td>'
    ) in section
    for (la, lb), count in Counter(
        (labels["original"][i], labels["caption2"][i]) for i in ids
    ).items():
        if la != lb:  # every changed transition with its count (the arrow is escaped)
            assert f'<tr><td>{la}-&gt;{lb}</td><td class="n">{count}</td>' in section
    examples = _table(
        root,
        "SELECT caption_a, caption_b FROM variant_transition_examples WHERE occupation IS NULL",
    )
    assert any(html_lib.escape(c, quote=False) in section for c in examples["caption_b"])
    summary = coco[2]
    assert "any_indicator" in summary and "caption2" in summary


def test_status_and_provenance(coco):
    root, _, _ = coco
    with Study.open(root / "study") as study:
        rows = {s.stage: s for s in status(study)}
        run = study.last_run("variants")
    assert rows["variants"].status == "done" and not rows["variants"].note
    assert rows["select"].note == ""  # the new config sections do not touch select's hash
    assert run["provenance"]["variants"] == ["caption2", "original"]
    assert set(stage("variants").writes) >= {"caption_variants", "variant_differences"}


# -- existing studies, bad input ---------------------------------------------------------------
def test_an_existing_study_opens_unchanged_and_variants_skips(make_study, laion_path):
    study = make_study([laion_path], select={"sample_size": 20})
    from corpus_audit.stages.select import select
    from corpus_audit.stages.variants import variants

    select(study, progress=False)
    for table in ("caption_variants", "variant_mentions", "recaptions", "variant_differences"):
        study.con.execute(f"DROP TABLE {table}")  # a study made before these tables existed
    study.con.execute("DELETE FROM schema_version WHERE version >= 2")  # (schema version 1)
    before = study.fingerprint("captions"), study.fingerprint("mentions")
    root = study.root
    study.close()
    with Study.open(root) as again:
        assert again.table_exists("caption_variants")
        assert (again.fingerprint("captions"), again.fingerprint("mentions")) == before
        assert {s.stage: s.note for s in status(again)}["select"] == ""
        run = variants(again, progress=False)
        assert run.skipped and "no caption variants" in run.messages[0]
        assert again.count("caption_variants") == 0


def test_bad_variant_input_is_one_line_and_changes_nothing(coco, tmp_path):
    root, wide, _ = coco
    bad = wide.copy()
    bad.loc[bad.index[:3], "caption2"] = None  # NULL captions: not captions of caption2
    bad.to_parquet(tmp_path / "bad.parquet", index=False)
    init_study(
        tmp_path / "s", [str(tmp_path / "bad.parquet")], overrides=_settings(similarity=False)
    ).close()
    for command in ("select", "variants"):
        done = _cli(command, str(tmp_path / "s"))
        assert done.returncode == 0, done.stderr
    tables = ("caption_variants", "variant_mentions", "variant_differences", "variant_rates")
    with Study.open(tmp_path / "s") as study:
        run = study.last_run("variants")
        n1 = study.count("caption_variants", "variant = 'original'")
        n2 = study.count("caption_variants", "variant = 'caption2'")
        before = [study.fingerprint(t) for t in tables]
    assert run["dropped"] == {"no_text:caption2": 3}
    m1 = set(_mentions(root / "study" / "study.duckdb"))
    m2 = set(_mentions(root / "check2" / "study.duckdb")) - {0, 1, 2}
    assert n1 == len(m1 | m2) and n2 == len((m1 | m2) - {0, 1, 2})

    toml = tmp_path / "s" / "study.toml"
    good = toml.read_text()
    for old, new, needle in (
        ('{caption2 = "caption2"}', '{caption2 = "nope"}', "no column 'nope' for caption variant"),
        ('{caption2 = "caption2"}', '{caption2 = "image_id"}', "image_id"),
        ('{caption2 = "caption2"}', '{"Bad-Name" = "caption2"}', "is not a variant name"),
        ('baseline = "original"', 'baseline = "blip"', "no variant 'blip' in this study"),
    ):
        toml.write_text(good.replace(old, new))
        done = _cli("variants", str(tmp_path / "s"))
        assert done.returncode == 2, done.stderr
        assert needle in done.stderr and len(done.stderr.strip().splitlines()) == 1
    toml.write_text(good)
    with Study.open(tmp_path / "s") as study:
        assert [study.fingerprint(t) for t in tables] == before
        assert study.last_run("variants")["finished_at"] == run["finished_at"]
