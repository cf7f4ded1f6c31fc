"""A model-only audit (`init --kind images`, docs/model_only.md) and `analyze`'s
generated_gender table and labour figure, on real photos imported as a model's images (into a
study without a corpus, and into an amplification study with the LAION sample as its corpus),
labelled by the real MediaPipe detector and agegender classifier.

Photos: astronaut and Grace Hopper (women), the cameraman (a man), and a grey picture with no
face (dropped by the face filter). The expected counts are recounted from the labels and
face_filter tables, not from the photos: the table must say what the labels say.
"""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import numpy as np
import pytest
from image_fixtures import photo
from PIL import Image

from corpus_audit.cli import main
from corpus_audit.core.pipeline import init_study, stage_function
from corpus_audit.methods.lexicon.labour_map import load_labour_map
from corpus_audit.report.labour_figure import labour_figure, labour_figure_for, labour_rows
from corpus_audit.stages.analyze.generated_gender import headline

LEXICON = Path(__file__).parents[2] / "corpus_audit/methods/lexicon/data"
# prompt id -> photos of the imported model "m" (None: a grey picture, no face)
IMPORTS = {
    "paper:1:nurse": ["astronaut", "grace", "camera", None],
    "paper:2:nurse": ["astronaut"],
    "paper:1:engineer": ["camera", "camera", "grace"],
}


def write_photos(folder: Path, imports: dict[str, list[str | None]], model: str = "m") -> Path:
    """The photos of ``imports``, each at its own size (its own bytes), and a CSV manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    n = 0
    for prompt_id, names in imports.items():
        for i, name in enumerate(names):
            side = 256 + 4 * n
            n += 1
            pixels = photo(name) if name else np.full((64, 64, 3), 128, np.uint8)
            rel = f"{prompt_id.replace(':', '_').replace('/', '_')}_{i}.png"
            Image.fromarray(pixels).resize((side, side)).save(folder / rel)
            rows.append({"file": rel, "prompt_id": prompt_id, "model": model, "index": i})
    manifest = folder / "manifest.csv"
    with manifest.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return manifest


def recount(root: Path) -> dict[str, tuple[int, int, int, int, int]]:
    """(images, female, male, ambiguous, dropped) per prompt, from images, labels and
    face_filter directly."""
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT i.prompt_id, l.label, f.kept FROM images i "
            "LEFT JOIN face_filter f USING (image_id) LEFT JOIN labels l USING (image_id) "
            "WHERE i.source = 'generated'"
        ).fetchall()
    finally:
        con.close()
    out: dict[str, list[int]] = {}
    for prompt_id, label, kept in rows:
        c = out.setdefault(prompt_id, [0, 0, 0, 0, 0])
        c[0] += 1
        if label is None or kept is False:
            c[4] += 1
        else:
            c[("female", "male", "ambiguous").index(label) + 1] += 1
    return {k: tuple(v) for k, v in out.items()}


def table(root: Path) -> list[dict]:
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        cur = con.execute(
            "SELECT * FROM generated_gender ORDER BY occupation, prompt_id NULLS FIRST"
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()


def check_against_recount(root: Path, imports: dict[str, list[str | None]]) -> list[dict]:
    """generated_gender equals the recount per prompt and pooled; counts add up; the labour
    statistic of the shipped map is beside each row. Returns the table."""
    rows = table(root)
    counts = recount(root)
    labour = load_labour_map()
    per_prompt = {r["prompt_id"]: r for r in rows if r["prompt_id"] is not None}
    assert set(per_prompt) == set(imports)
    for prompt_id, (n, f, m, a, d) in counts.items():
        r = per_prompt[prompt_id]
        assert (r["n_images"], r["n_female"], r["n_male"], r["n_ambiguous"], r["n_dropped"]) == (
            n, f, m, a, d
        )  # fmt: skip
        assert r["n_images"] == len(imports[prompt_id])
        expected = None if f + m == 0 else 100.0 * f / (f + m)
        assert r["percent_female"] == pytest.approx(expected)
    for r in rows:
        assert r["n_female"] + r["n_male"] + r["n_ambiguous"] + r["n_dropped"] == r["n_images"]
        assert r["language"] == "en"
        stat = labour[("en", r["occupation"])]
        assert r["labour_percent_female"] == stat.percent_female and r["labour_source"]
        if r["percent_female"] is not None:
            assert r["ci_low"] <= r["percent_female"] <= r["ci_high"]
    for occupation in {r["occupation"] for r in rows}:
        pooled = [r for r in rows if r["occupation"] == occupation and r["prompt_id"] is None]
        parts = [r for r in rows if r["occupation"] == occupation and r["prompt_id"] is not None]
        assert len(pooled) == 1
        for col in ("n_images", "n_female", "n_male", "n_ambiguous", "n_dropped"):
            assert pooled[0][col] == sum(p[col] for p in parts)
    return rows


def test_labour_map_covers_the_lexicon_and_follows_the_sector_map():
    """Every lexicon occupation has a map row; the German rows are the sector mapping's; the
    figures are those of the tables they name."""
    labour = load_labour_map()
    with (LEXICON / "occupations_en.csv").open(encoding="utf-8") as fh:
        occupations = [r["occupation"] for r in csv.DictReader(fh)]
    lines = (LEXICON / "labour_stats_map.csv").read_text(encoding="utf-8").splitlines()
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    assert sorted(r["occupation"] for r in rows if r["language"] == "en") == sorted(occupations)
    sectors_lines = (LEXICON / "de_ba2024_occupation_sectors.csv").read_text("utf-8").splitlines()
    sectors = {
        r["occupation"]: r["sector"]
        for r in csv.DictReader(line for line in sectors_lines if not line.startswith("#"))
    }
    assert {r["occupation"]: r["key"] for r in rows if r["language"] == "de"} == sectors
    assert labour[("en", "nurse")].percent_female == 87.9  # BLS 2024, the PST table
    assert labour[("en", "accountant")].percent_female == 58.8  # same as auditor
    assert labour[("en", "architect")].percent_female == 20.81  # BLS 2015, Winogender
    assert "2015" in labour[("en", "architect")].source
    assert labour[("de", "nurse")].percent_female == 72.7195  # S2
    assert ("en", "athlete") not in labour  # no statistic: never guessed


def test_generated_gender_of_an_imported_model_in_an_amplification_study(
    tmp_path, laion_path, capsys
):
    root = tmp_path / "study"
    study = init_study(
        root,
        [str(laion_path)],
        overrides={
            "select": {"sample_size": 20},
            "engine": {"device": "cpu"},
            "label": {"face_model": "full_range"},
        },
    )
    stage_function("select")(study, progress=False)
    study.close()
    manifest = write_photos(tmp_path / "photos", IMPORTS)
    assert main(["-q", "import-images", str(root), str(manifest)]) == 0
    assert main(["-q", "label", str(root)]) == 0
    assert main(["-q", "analyze", str(root)]) == 0
    rows = check_against_recount(root, IMPORTS)
    assert {r["n_dropped"] for r in rows if r["prompt_id"] == "paper:1:nurse"} == {1}

    from corpus_audit.core.store import Study

    with Study.open(root, read_only=True) as study:
        pooled = labour_rows(study)
        _rows, saved = labour_figure_for(study, tmp_path / "figures")
        per_prompt = headline(study, limit=None, pooled=False)
    assert saved is not None and saved.png.startswith(b"\x89PNG") and saved.png_path.is_file()
    assert sorted(r["prompt"] for r in per_prompt) == sorted(IMPORTS)
    assert [r["occupation"] for r in pooled] == ["engineer", "nurse"]
    fig = labour_figure(pooled)
    assert fig is not None
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"nurse", "engineer"} <= texts
    assert labour_figure([{**r, "labour_percent_female": None} for r in pooled]) is None
    assert labour_figure([]) is None


def _stages_run(root: Path) -> set[str]:
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        return {s for (s,) in con.execute("SELECT DISTINCT stage FROM stage_runs").fetchall()}
    finally:
        con.close()


CORPUS_STAGES = ("select", "indicators", "neighbors", "images")


def test_a_model_only_study_from_init_kind_images_to_the_report(tmp_path, capsys):
    """The acceptance test of a model-only audit: init --kind images (no corpus), import real
    photos, label, analyze: %female per prompt equals a recount of the labels, the labour
    statistic beside it; status and run know only the kind's stages."""
    root = tmp_path / "audit"
    assert main(["init", str(root), "--kind", "images"]) == 0
    out = capsys.readouterr().out
    assert (
        "248 prompts (paper, 62 occupations)" in out and "next: corpus-audit import-images" in out
    )
    settings = ["label.face_model=full_range", "engine.device=cpu"]
    assert main(["-q", "config", "set", str(root), *settings]) == 0
    assert main(["status", str(root)]) == 0
    status = capsys.readouterr().out
    assert not any(f"\n{s} " in status for s in CORPUS_STAGES)
    assert "next: import the model's images" in status

    manifest = write_photos(tmp_path / "photos", IMPORTS)
    assert main(["-q", "import-images", str(root), str(manifest)]) == 0
    assert main(["status", str(root)]) == 0
    assert "next: corpus-audit label" in capsys.readouterr().out
    assert main(["-q", "label", str(root)]) == 0
    capsys.readouterr()
    assert main(["-q", "analyze", str(root)]) == 0
    printed = capsys.readouterr().out
    rows = check_against_recount(root, IMPORTS)
    # the console's headline: one line per occupation with %female, n, ambiguous, dropped, labour
    nurse = next(r for r in rows if r["occupation"] == "nurse" and r["prompt_id"] is None)
    line = next(x for x in printed.splitlines() if x.startswith("m ") and " nurse " in x)
    assert f"{nurse['percent_female']:.0f} [{nurse['ci_low']:.0f}, {nurse['ci_high']:.0f}]" in line
    assert line.split()[-1] == "88" and len(printed.splitlines()) <= 12  # BLS 2024: 87.9 %
    assert "amplification" not in printed.lower().replace("no amplification", "")

    assert main(["status", str(root)]) == 0
    status = capsys.readouterr().out
    assert "next: corpus-audit report" in status and "generate: not needed" in status
    assert main(["-q", "run", str(root)]) == 0
    capsys.readouterr()
    # `run` ran the kind's stages; the import is a stage of its command (recorded when it ran)
    ran = {"prompts", "generate", "label", "analyze", "categories", "report", "import_images"}
    assert _stages_run(root) == ran
    assert (root / "report" / "report.html").is_file()
    assert check_against_recount(root, IMPORTS) == rows  # run redid nothing that changes them


def test_kind_images_refuses_a_corpus_and_an_unknown_occupation_in_one_line(
    tmp_path, laion_path, capsys
):
    root = tmp_path / "audit"
    assert main(["init", str(root), "--kind", "images", "--corpus", str(laion_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "drop --corpus" in err and "\n" not in err and not (root / "study.toml").exists()

    assert main(["-q", "init", str(root), "--kind", "images"]) == 0
    manifest = write_photos(tmp_path / "photos", {"paper:1:wizard": ["astronaut"]})
    capsys.readouterr()
    assert main(["-q", "import-images", str(root), str(manifest)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "manifest.csv" in err and "'wizard'" in err, err
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM images").fetchone() == (0,)
    finally:
        con.close()
    assert main(["-q", "select", str(root)]) == 2  # no corpus to read: said in one line
    err = capsys.readouterr().err.strip()
    assert "has none" in err and "corpus-audit prompts" in err and "\n" not in err
    # the prompts stage belongs to a study without a corpus only
    other = tmp_path / "corpus_study"
    assert main(["-q", "init", str(other), "--corpus", str(laion_path)]) == 0
    capsys.readouterr()
    assert main(["-q", "prompts", str(other)]) == 2
    assert "`select` writes the prompts" in capsys.readouterr().err


def test_german_prompts_get_the_german_statistic(tmp_path, capsys):
    """A BAFIS prompt table added to lexicon.prompts: `prompts` rewrites the prompts; the German
    nurse prompt's images stand beside the German sector statistic, the English one's beside
    BLS, each language pooled on its own."""
    root = tmp_path / "audit"
    assert main(["-q", "init", str(root), "--kind", "images"]) == 0
    settings = [
        'lexicon.prompts=["builtin:prompts_en.toml", "builtin:bafis/direct"]',
        'lexicon.prompt_occupations=["nurse"]',
        "label.face_model=full_range",
        "engine.device=cpu",
    ]
    assert main(["-q", "config", "set", str(root), *settings]) == 0
    assert main(["-q", "prompts", str(root)]) == 0
    imports = {"bafis/direct/de:1:nurse": ["astronaut", "camera"], "paper:1:nurse": ["grace"]}
    manifest = write_photos(tmp_path / "photos", imports)
    assert main(["-q", "import-images", str(root), str(manifest)]) == 0
    assert main(["-q", "label", str(root)]) == 0
    assert main(["-q", "analyze", str(root)]) == 0
    printed = capsys.readouterr().out
    assert "nurse (de)" in printed
    rows = {(r["language"], r["prompt_id"]): r for r in table(root)}
    assert set(rows) == {
        ("de", "bafis/direct/de:1:nurse"), ("de", None), ("en", "paper:1:nurse"), ("en", None)
    }  # fmt: skip
    german = rows[("de", None)]
    assert german["labour_percent_female"] == 72.7195 and "Bundesagentur" in german["labour_source"]
    assert german["n_images"] == 2 and rows[("en", None)]["n_images"] == 1
    assert rows[("en", None)]["labour_percent_female"] == 87.9


def test_the_api_makes_a_model_only_study_with_its_prompts_and_refuses_a_corpus(
    tmp_path, laion_path
):
    from corpus_audit import Study as ApiStudy
    from corpus_audit.core.errors import StudyError

    with pytest.raises(StudyError, match="reads no corpus"):
        ApiStudy.create(tmp_path / "refused", [laion_path], kind="images")
    assert not (tmp_path / "refused" / "study.toml").exists()
    study = ApiStudy.create(tmp_path / "audit", kind="images")
    try:
        prompts = study.table("prompts")
        assert len(prompts) == 248 and prompts["occupation"].nunique() == 62
        assert "generated_vs_labour" not in study.figures()  # no images: no empty figure
    finally:
        study.close()
