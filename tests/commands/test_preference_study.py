"""METHODS §3 wired into a study: MAGBIG/BAFIS prompts -> generate -> label -> categories ->
report, and `corpus-audit battles export / import` with the page clicked through in Chromium.

One study (module scope): real LAION captions for `select`, ``lexicon.prompts`` = MAGBIG
direct German + BAFIS direct (English and German) restricted to three occupations, two tiny
random-weight Stable Diffusion pipelines built offline (``corpus_audit.backends.fakes.diffusion.random_sd_pipeline``, as
tests/stages/test_generate.py), and then every generated PNG replaced by a real photo of a woman
(astronaut) or a man (camera) by a rule of the test, so the real MediaPipe detector and the real
agegender classifier give labels the test knows. Expected shares, Wilson intervals and official
figures are computed here with plain loops from the rule and from the statistics files read
with the csv module.
"""

from __future__ import annotations

import csv
import math
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from statistics import NormalDist

import pytest
from image_fixtures import photo
from PIL import Image

from corpus_audit.cli import main
from corpus_audit.core.errors import LexiconError
from corpus_audit.core.pipeline import init_study, stage_function
from corpus_audit.core.store import Study

OCCUPATIONS = ["nurse", "doctor", "carpenter"]
PROMPTS = ["builtin:magbig/direct/de", "builtin:bafis/direct"]
TINY = {"steps": 2, "height": 32, "width": 32}
CATEGORY = {
    "nurse": "Healthcare & Social Services",
    "doctor": "Healthcare & Social Services",
    "carpenter": "Construction & Maintenance",
}
# (model index, occupation) -> photo per image index: which real photo replaces the PNG
FEMALE, MALE = "astronaut", "camera"
RULE = {
    (0, "nurse"): (FEMALE, FEMALE),
    (0, "doctor"): (FEMALE, MALE),
    (0, "carpenter"): (MALE, MALE),
    (1, "nurse"): (FEMALE, MALE),
    (1, "doctor"): (MALE, MALE),
    (1, "carpenter"): (MALE, FEMALE),
}
SOURCE_DE = "test figures <script>alert(1)</script> & (Bundesagentur style)"  # escaped?
GERMAN_STATS = f"""occupation,category,percent_female,source,year,country
,Healthcare & Social Services,75.0,"{SOURCE_DE}",2024,DE
carpenter,,2.5,"{SOURCE_DE}",2024,DE
"""


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The tiny models on one torch thread: ~3x faster on a shared 2-core machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> list[Path]:
    from corpus_audit.backends.fakes.diffusion import random_sd_pipeline, write_clip_tokenizer_files

    root = tmp_path_factory.mktemp("pref_models")
    first = root / "tiny-a"
    tokenizer = write_clip_tokenizer_files(root / "tokenizer")
    random_sd_pipeline("tiny", tokenizer_dir=tokenizer).save_pretrained(first)
    second = root / "tiny-b"
    shutil.copytree(first, second)  # same weights, another model id: enough for battles
    return [first, second]


def _replace_with_photos(study: Study, model_ids: list[str]) -> dict[str, str]:
    """Overwrite each generated PNG with the photo :data:`RULE` picks; image_id -> photo."""
    from corpus_audit.core.imagefile import study_image_path

    rows = study.con.execute(
        "SELECT image_id, model_id, prompt_id, occupation, path FROM images "
        "WHERE source = 'generated' ORDER BY model_id, prompt_id, image_id"
    ).fetchall()
    counter: Counter = Counter()
    pictures = {}
    for image_id, model_id, prompt_id, occupation, path in rows:
        name = RULE[(model_ids.index(model_id), occupation)][counter[(model_id, prompt_id)]]
        counter[(model_id, prompt_id)] += 1
        Image.fromarray(photo(name)).resize((256, 256)).save(study_image_path(study.root, path))
        pictures[image_id] = name
    return pictures


@pytest.fixture(scope="module")
def built(tmp_path_factory, laion_path, models):
    root = tmp_path_factory.mktemp("pref_study") / "study"
    root.mkdir()
    (root / "stats_de.csv").write_text(GERMAN_STATS, encoding="utf-8")
    study = init_study(
        root,
        [str(laion_path)],
        overrides={
            "lexicon": {
                "prompts": PROMPTS,
                "prompt_occupations": OCCUPATIONS,
                "official_stats": {
                    "en": "builtin:labor_stats_us_bls2024_pst.csv",
                    "de": "stats_de.csv",
                },
            },
            "generate": {
                "models": [str(m) for m in models],
                "images_per_prompt": 2,
                "batch_size": 18,
                **TINY,
            },
            "engine": {"device": "cpu"},
            "label": {"face_model": "full_range"},
        },
    )
    for name in ("select", "generate"):
        stage_function(name)(study, progress=False)
    model_ids = sorted(
        r[0]
        for r in study.con.execute(
            "SELECT DISTINCT model_id FROM images WHERE source = 'generated'"
        ).fetchall()
    )
    pictures = _replace_with_photos(study, model_ids)
    for name in ("label", "categories", "report"):
        stage_function(name)(study, progress=False)
    yield {"study": study, "root": root, "models": model_ids, "pictures": pictures}
    study.close()


# -- prompts ----------------------------------------------------------------------------------
def test_prompts_table_holds_every_listed_set_and_language(built, shared_data):
    study = built["study"]
    got = study.con.execute(
        "SELECT p.prompt_set, p.occupation, p.text, c.family, c.variant, c.language, c.category "
        "FROM prompts p JOIN prompt_categories c USING (prompt_id) ORDER BY 1, 2"
    ).fetchall()
    sets = sorted({r[0] for r in got})
    assert sets == ["bafis/direct/de", "bafis/direct/en", "magbig/direct/de"]
    assert len(got) == 9 and study.count("prompts") == 9  # nothing else: one prompt table each
    shared = shared_data / "bafis"  # the upstream files, read here with the csv module
    for prompt_set, occupation, text, family, variant, language, category in got:
        assert (family, variant, language) == tuple(prompt_set.replace("/", " ").split())
        assert category == CATEGORY[occupation]
        source = shared / f"{family}_occupations_{variant}.csv"
        with open(source, encoding="utf-8", newline="") as fh:
            row = next(r for r in csv.DictReader(fh) if r["occupation"].strip() == occupation)
        assert text == row[language].strip()


def test_every_prompt_was_generated_by_both_models(built):
    study = built["study"]
    per = study.con.execute(
        "SELECT model_id, prompt_id, count(*) FROM images WHERE source = 'generated' GROUP BY ALL"
    ).fetchall()
    assert len(per) == 2 * 9 and all(n == 2 for _, _, n in per)


# -- categories -------------------------------------------------------------------------------
def _wilson(k: int, n: int) -> tuple[float, float]:
    z = NormalDist().inv_cdf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return 100 * (centre - half), 100 * (centre + half)


def _bls(shared_data: Path) -> dict[str, float]:
    """The U.S. BLS 2024 figures of the shared data copy (rows with a value)."""
    with open(shared_data / "labor_stats_us_bls2024_pst.csv", encoding="utf-8", newline="") as fh:
        return {
            r["occupation"]: float(r["percent_female"])
            for r in csv.DictReader(fh)
            if r["percent_female"]
        }


def test_labels_follow_the_photos(built):
    study = built["study"]
    labels = dict(study.con.execute("SELECT image_id, label FROM labels").fetchall())
    assert len(labels) == 36
    expected = {i: "female" if p == FEMALE else "male" for i, p in built["pictures"].items()}
    assert labels == expected


def test_category_distribution_against_hand_counts_and_official_figures(built, shared_data):
    study = built["study"]
    counts: dict[tuple, Counter] = defaultdict(Counter)
    images = study.con.execute(
        "SELECT i.image_id, i.model_id, p.prompt_set, p.occupation FROM images i "
        "JOIN prompts p USING (prompt_id) WHERE i.source = 'generated'"
    ).fetchall()
    for image_id, model, prompt_set, occupation in images:
        family, variant, language = prompt_set.split("/")
        key = (model, family, language, variant, CATEGORY[occupation])
        counts[key][built["pictures"][image_id]] += 1
    bls = _bls(shared_data)
    official = {
        ("en", "Healthcare & Social Services"): (bls["nurse"] + bls["physician"]) / 2,
        ("en", "Construction & Maintenance"): bls["carpenter"],
        ("de", "Healthcare & Social Services"): 75.0,
        ("de", "Construction & Maintenance"): 2.5,
    }
    cur = study.con.execute("SELECT * FROM category_distribution")
    cols = [d[0] for d in cur.description]
    got = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    assert len(got) == len(counts) == 2 * 3 * 2  # models x (family, language) x categories
    for row in got:
        key = (row["model_id"], row["prompt_set"], row["language"], row["variant"], row["category"])
        f, m = counts[key][FEMALE], counts[key][MALE]
        assert (row["n_female"], row["n_male"], row["n_ambiguous"]) == (f, m, 0)
        assert row["percent_female"] == pytest.approx(100 * f / (f + m))
        low, high = _wilson(f, f + m)
        assert (row["ci_low"], row["ci_high"]) == (pytest.approx(low), pytest.approx(high))
        ref = official[(row["language"], row["category"])]
        assert row["official_pf"] == pytest.approx(ref)
        assert row["gap_pp"] == pytest.approx(100 * f / (f + m) - ref)
        assert row["official_country"] == ("US" if row["language"] == "en" else "DE")


def test_report_shows_categories_next_to_official_figures(built):
    html = (built["root"] / "report" / "report.html").read_text(encoding="utf-8")
    assert 'id="category-distribution"' in html
    assert 'id="fig-categories_de"' in html and 'id="fig-categories_en"' in html
    table = html.split('id="category-distribution"')[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + 12  # header + one row per group
    assert "Healthcare &amp; Social Services" in table
    assert "test figures &lt;script&gt;alert(1)&lt;/script&gt; &amp; (Bundesagentur" in table
    assert "<script" not in html
    assert '<td class="num">75.0</td>' in table
    assert (built["root"] / "report" / "figures" / "categories_de.png").is_file()


def test_stage_skips_without_prompt_tables(make_study, laion_path):
    study = make_study([laion_path], name="plain")
    stage_function("select")(study, progress=False)
    run = stage_function("categories")(study, progress=False)
    assert run.skipped and "no prompt-table prompts" in run.messages[0]


def test_bad_statistics_file_names_file_and_line_and_keeps_the_table(built, capsys):
    root = built["root"]
    study = built["study"]
    before = study.con.execute("SELECT * FROM category_distribution ORDER BY ALL").fetchall()
    good = (root / "stats_de.csv").read_text(encoding="utf-8")
    try:
        (root / "stats_de.csv").write_text(good + ",Helthcare,50,x,2024,DE\n", encoding="utf-8")
        study.close()
        assert main(["-q", "categories", str(root)]) == 2
        err = capsys.readouterr().err
        assert "stats_de.csv:4: category 'Helthcare' is not one of" in err
    finally:
        (root / "stats_de.csv").write_text(good, encoding="utf-8")
        built["study"] = study = Study.open(root)
    after = study.con.execute("SELECT * FROM category_distribution ORDER BY ALL").fetchall()
    assert after == before


@pytest.mark.parametrize(
    ("lexicon", "match"),
    [
        ({"prompts": ["builtin:magbig/nosuch/de"]}, "no such built-in prompt table"),
        ({"prompts": ["builtin:magbig/direct/xx"]}, "no column for language 'xx'"),
        (
            {"prompts": ["builtin:magbig/direct/de"], "prompt_occupations": ["wizard"]},
            "lexicon.prompt_occupations: 'wizard' not in the listed prompt tables",
        ),
        (
            {"prompts": ["builtin:bafis/direct", "builtin:bafis/direct/de"]},
            "both give prompt 'bafis/direct/de:1:",
        ),
    ],
)
def test_bad_prompt_settings_are_one_clear_error(make_study, laion_path, lexicon, match):
    study = make_study([laion_path], name="bad", lexicon=lexicon)
    with pytest.raises(LexiconError, match=match):
        stage_function("select")(study, progress=False)
    assert study.count("prompts") == 0


# -- battles ----------------------------------------------------------------------------------
def _cli(built, *args: str) -> int:
    """Run the CLI on the study (closed meanwhile: one process, one open database)."""
    built["study"].close()
    try:
        return main(["-q", *args])
    finally:
        built["study"] = Study.open(built["root"])


def _rows(study: Study, sql: str, params: list | None = None) -> list[dict]:
    cur = study.con.execute(sql, params or [])
    cols = [d[0] for d in cur.description]
    return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _plain_elo(battles: list[dict]) -> dict[str, float]:
    """Elo by METHODS §3 in a plain loop: k 4, scale 400, base 10, initial 1000."""
    rating: dict[str, float] = defaultdict(lambda: 1000.0)
    for b in battles:
        a, o = b["model_a"], b["model_b"]
        e_a = 1 / (1 + 10 ** ((rating[o] - rating[a]) / 400))
        e_b = 1 / (1 + 10 ** ((rating[a] - rating[o]) / 400))
        s_a = {0: 1.0, 1: 0.0}.get(b["vote"], 0.5)
        rating[a] += 4 * (s_a - e_a)
        rating[o] += 4 * (1 - s_a - e_b)
    return dict(rating)


@pytest.fixture(scope="module")
def voted(built, tmp_path_factory):
    """`battles export` (bias + image quality, 4 battles), the page clicked through in
    headless Chromium, the downloaded CSV imported with `battles import`."""
    from cdp import Browser

    root = built["root"]
    args = ["battles", "export", str(root), "--aspect", "bias", "--aspect", "image_quality"]
    assert _cli(built, *args, "--n", "4", "--seed", "5") == 0
    page = root / "battles" / "battles.html"
    work = tmp_path_factory.mktemp("chromium")
    downloads = work / "downloads"
    downloads.mkdir()
    with Browser(work / "profile", downloads) as browser:
        browser.open(page.as_uri())
        assert browser.evaluate("document.images.length") == 8
        browser.click("#annotator")
        browser.type_text("Ann")
        browser.press("Enter")
        # 1: bias A, quality B; 2: bias tie, quality A; 3: bias B, quality tie; 4: bias A,
        # quality skipped (n)
        for key in ("a", "b", "t", "a", "b", "t", "a", "n"):
            browser.press(key)
        browser.press("d")
        saved = browser.wait_download()
        assert browser.problems() == []
    assert _cli(built, "battles", "import", str(root), str(saved), "--rounds", "200") == 0
    return {"sheet": saved}


def test_export_draws_same_prompt_pairs_of_two_models(built, voted):
    study = built["study"]
    pairs = _rows(study, "SELECT * FROM battle_pairs ORDER BY pair_id")
    assert len(pairs) == 4
    images = {
        r["image_id"]: r for r in _rows(study, "SELECT image_id, model_id, prompt_id FROM images")
    }
    for p in pairs:
        a, b = images[p["image_a"]], images[p["image_b"]]
        assert a["prompt_id"] == b["prompt_id"] == p["prompt_id"]
        assert {a["model_id"], b["model_id"]} == set(built["models"])
    assert Counter(p["model_a"] for p in pairs) == Counter(dict.fromkeys(built["models"], 2))
    manifest = (built["root"] / "battles" / "pairs.csv").read_text(encoding="utf-8")
    assert all(p["pair_id"] in manifest for p in pairs)
    html = (built["root"] / "battles" / "battles.html").read_text(encoding="utf-8")
    assert all(m not in html for m in built["models"])  # blind


def test_import_stores_the_clicked_votes_and_the_ratings(built, voted):
    study = built["study"]
    sheet = voted["sheet"].read_text(encoding="utf-8").splitlines()
    assert sheet[0] == "item,pair_id,prompt_id,aspect,vote,annotator"
    by_item = {}
    for line in sheet[1:]:
        item, pair, _, aspect, vote, annotator = line.split(",")
        assert annotator == "Ann"
        by_item[(int(item), aspect)] = (pair, vote)
    clicked = {
        (1, "bias"): "A", (1, "image_quality"): "B", (2, "bias"): "tie",
        (2, "image_quality"): "A", (3, "bias"): "B", (3, "image_quality"): "tie",
        (4, "bias"): "A", (4, "image_quality"): "",
    }  # fmt: skip
    assert {k: v[1] for k, v in by_item.items()} == clicked
    stored = _rows(study, "SELECT * FROM battles ORDER BY source_file, line, aspect")
    code = {"A": 0, "B": 1, "tie": 2}
    assert sorted((r["pair_id"], r["aspect"], r["vote"]) for r in stored) == sorted(
        (by_item[k][0], k[1], code[v]) for k, v in clicked.items() if v
    )
    pairs = {p["pair_id"]: p for p in _rows(study, "SELECT * FROM battle_pairs")}
    for r in stored:
        assert (r["model_a"], r["model_b"]) == (
            pairs[r["pair_id"]]["model_a"],
            pairs[r["pair_id"]]["model_b"],
        )
    ratings = _rows(study, "SELECT * FROM preference_ratings")
    assert {r["aspect"] for r in ratings} == {"bias", "image_quality"}
    for aspect in ("bias", "image_quality"):
        expected = _plain_elo([r for r in stored if r["aspect"] == aspect])
        got = {r["model_id"]: r["elo"] for r in ratings if r["aspect"] == aspect}
        assert got == pytest.approx(expected)
        mine = [r for r in ratings if r["aspect"] == aspect]
        assert all(r["elo_ci_low"] <= r["elo_median"] <= r["elo_ci_high"] for r in mine)
    wins = Counter()
    for r in stored:
        if r["vote"] != 2:
            wins[(r["aspect"], r["model_a"] if r["vote"] == 0 else r["model_b"])] += 1
    for row in _rows(study, "SELECT * FROM preference_pairs"):
        assert row["wins"] == wins[(row["aspect"], row["model_id"])]


def test_report_shows_the_ratings(built, voted):
    assert _cli(built, "report", str(built["root"])) == 0
    html = (built["root"] / "report" / "report.html").read_text(encoding="utf-8")
    assert 'id="preference-ratings"' in html and 'id="fig-preference_ratings"' in html
    assert "7 votes by 1 annotator(s) on 4 battles" in " ".join(html.split())
    table = html.split('id="preference-ratings"')[1].split("</table>")[0]
    assert table.count("<tr>") == 1 + 2 * 2  # header + aspects x models


def test_bad_vote_row_names_file_and_line_and_stores_nothing(built, voted, tmp_path, capsys):
    study = built["study"]
    before = study.con.execute("SELECT * FROM battles ORDER BY ALL").fetchall()
    lines = voted["sheet"].read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace(",A,", ",C,")  # item 1 bias: a vote that is not A/B/tie
    lines[2] = lines[2].replace(",B,", ",A,")  # a valid change that must not be stored either
    bad = tmp_path / "votes_bad.csv"
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    capsys.readouterr()
    assert _cli(built, "battles", "import", str(built["root"]), str(bad)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and f"{bad}:2: vote 'C' is not A, B or tie" in err
    assert len(err.splitlines()) == 1
    after = built["study"].con.execute("SELECT * FROM battles ORDER BY ALL").fetchall()
    assert after == before


def test_import_before_export_and_unknown_pair(make_study, laion_path, built, voted, tmp_path):
    from corpus_audit.commands.battles import import_battles
    from corpus_audit.core.errors import BattleError, StageOrderError

    fresh = make_study([laion_path], name="fresh")
    # the runner checks the declared input (battles_export) and names the command to run
    with pytest.raises(
        StageOrderError,
        match="`battles_export`, which has not run; run `corpus-audit battles export",
    ):
        import_battles(fresh, [voted["sheet"]])
    other = tmp_path / "votes_other.csv"
    other.write_text(
        "item,pair_id,prompt_id,aspect,vote,annotator\n1,pdeadbeef0000,x,bias,A,Bob\n",
        encoding="utf-8",
    )
    with pytest.raises(BattleError, match=r"votes_other.csv:2: pair_id 'pdeadbeef0000' is not"):
        import_battles(built["study"], [other])


def test_analyze_leaves_prompt_tables_to_the_categories_stage(built):
    """MAGBIG/BAFIS prompts have template_id 1, which is not the paper's template #1: the
    amplification analysis must not average them into its #1 column."""
    study = built["study"]
    stage_function("analyze")(study, progress=False)
    assert study.count("labels") == 36  # every generated image is labelled...
    assert study.count("percent_female", "side = 'generated'") == 0  # ...and none analysed here
    assert study.count("amplification", "generated_n > 0") == 0


def test_worked_example_of_the_docs(built):
    """docs/preferences.md: model A, BAFIS English, Healthcare & Social Services: nurse 2
    female, doctor 1 female + 1 male -> 75.0 %; U.S. BLS nurse 87.9 and physician 43.8 (the
    doctor's alias) -> 65.85; gap +9.15; German prompts against the German file's 75.0."""
    rows = _rows(
        built["study"],
        "SELECT language, percent_female, ci_low, ci_high, official_pf, gap_pp, official_basis "
        "FROM category_distribution WHERE model_id = ? AND prompt_set = 'bafis' "
        "AND category = 'Healthcare & Social Services' ORDER BY language",
        [built["models"][0]],
    )
    de, en = rows
    assert en["percent_female"] == 75.0 and en["official_pf"] == pytest.approx(65.85)
    assert en["gap_pp"] == pytest.approx(9.15)
    assert (round(en["ci_low"], 1), round(en["ci_high"], 1)) == (30.1, 95.4)
    assert en["official_basis"] == "mean of 2 occupations"
    assert de["official_pf"] == 75.0 and de["gap_pp"] == 0.0 and de["official_basis"] == "category"


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("prompts = []", "lexicon.prompts: expected a prompt set or a non-empty list"),
        ("prompts = 3", "lexicon.prompts: expected a prompt set or a non-empty list"),
        ('prompts = ["builtin:magbig/direct/de", ""]', r"lexicon.prompts\[1\]: expected"),
        ("official_stats = {de = 3}", "lexicon.official_stats.de: expected a file name"),
        ('prompt_occupations = "nurse"', "lexicon.prompt_occupations: expected a list"),
    ],
)
def test_bad_lexicon_settings_name_the_key(tmp_path, line, match):
    from corpus_audit.core.config import ConfigError, load_config

    (tmp_path / "study.toml").write_text(f"[lexicon]\n{line}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=match):
        load_config(tmp_path)


def test_export_errors(built, capsys):
    root = str(built["root"])
    assert _cli(built, "battles", "export", root, "--models", "nosuch", built["models"][0]) == 2
    assert "battles: no images of model(s) nosuch" in capsys.readouterr().err
    assert _cli(built, "battles", "export", root, "--n", "0") == 2
    assert "n must be >= 1, got 0" in capsys.readouterr().err
