"""`corpus-audit import-images`: another tool's images in each accepted layout, imported into a
study and run through label, analyze, categories and battles with the real MediaPipe detector
and the real agegender classifier.

The images are real photos (skimage's astronaut: a woman; its cameraman: a man), each at its
own size so every file has its own bytes, arranged as another tool would leave them: a CSV
manifest (DALL-E 3 style, with a revised-prompt column kept as metadata), a JSONL manifest with
prompt ids, a folder of ``<prompt text>/<n>.png`` (DALL-Eval) and the BAFIS dataset's
``metadata.json``. Expected shares are computed here from the photo each file holds.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from image_fixtures import photo
from PIL import Image

from corpus_audit.cli import main
from corpus_audit.core.errors import ManifestError
from corpus_audit.core.pipeline import init_study, stage_function
from corpus_audit.stages.import_images import (
    normalise,
    read_source,
    resolve_entries,
    study_prompts,
    unterminated_quote,
)

OCCUPATIONS = ["nurse", "doctor", "carpenter"]
FEMALE, MALE = "astronaut", "camera"
GENDER = {FEMALE: "female", MALE: "male"}
# model -> occupation -> photos of its English BAFIS direct prompt ("A photo of a nurse.")
RULE = {
    "dall-e-3": {"nurse": [FEMALE, FEMALE, FEMALE], "doctor": [FEMALE, MALE], "carpenter": [MALE]},
    "midjourney": {"nurse": [FEMALE, MALE], "doctor": [MALE, MALE], "carpenter": [MALE, FEMALE]},
}


def _photo_file(path: Path, name: str, n: int) -> None:
    """A real photo at 256 + 4n px: its own bytes, the same person."""
    path.parent.mkdir(parents=True, exist_ok=True)
    side = 256 + 4 * n
    Image.fromarray(photo(name)).resize((side, side)).save(path)


def _rows(root: Path, query: str, params: list | None = None) -> list[tuple]:
    con = duckdb.connect(str(root / "study.duckdb"), read_only=True)
    try:
        return con.execute(query, params or []).fetchall()
    finally:
        con.close()


def _counts(root: Path) -> tuple:
    return _rows(
        root,
        "SELECT (SELECT count(*) FROM images), (SELECT count(*) FROM image_imports), "
        "(SELECT count(*) FROM imported_images), (SELECT count(*) FROM import_skips)",
    )[0]


@pytest.fixture
def study_root(tmp_path, laion_path) -> Path:
    root = tmp_path / "study"
    root.mkdir()
    study = init_study(
        root,
        [str(laion_path)],
        overrides={
            "lexicon": {
                "prompts": ["builtin:prompts_en.toml", "builtin:bafis/direct"],
                "prompt_occupations": OCCUPATIONS,
                "occupations": _occupations(tmp_path),
            },
            "select": {"sample_size": 20},
            "engine": {"device": "cpu"},
            "label": {"face_model": "full_range"},
        },
    )
    stage_function("select")(study, progress=False)
    study.close()
    return root


def _occupations(tmp_path: Path) -> str:
    builtin = Path(__file__).parents[2] / "corpus_audit/methods/lexicon/data/occupations_en.csv"
    with builtin.open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh) if r["occupation"] in OCCUPATIONS]
    out = tmp_path / "occupations.csv"
    with out.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return str(out)


def _dalle_manifest(folder: Path) -> tuple[Path, dict[str, str]]:
    """A CSV manifest as an API script leaves it: prompt texts (some with odd whitespace), a
    revised prompt column, images in a subfolder; file -> photo."""
    truth = {}
    rows = []
    n = 0
    for occ, photos in RULE["dall-e-3"].items():
        for i, name in enumerate(photos):
            rel = f"img/{occ}_{i}.png"
            _photo_file(folder / rel, name, n)
            n += 1
            truth[rel] = name
            rows.append(
                {"file": rel, "prompt": f"  A photo of a\t{occ}. ", "model": "dall-e-3",
                 "revised_prompt": f"A photo of a {occ} <b>smiling</b>", "index": str(i)}
            )  # fmt: skip
    manifest = folder / "manifest.csv"
    with manifest.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return manifest, truth


def _midjourney_jsonl(folder: Path) -> tuple[Path, dict[str, str]]:
    truth = {}
    lines = []
    n = 20
    for occ, photos in RULE["midjourney"].items():
        for i, name in enumerate(photos):
            rel = f"{occ}-{i}.webp.png"
            _photo_file(folder / rel, name, n)
            n += 1
            truth[rel] = name
            lines.append(
                json.dumps({"file": rel, "prompt_id": f"bafis/direct/en:1:{occ}", "seed": 7 + i})
            )
    manifest = folder / "mj.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest, truth


def _wilson_free_share(photos: list[str]) -> float:
    genders = Counter(GENDER[p] for p in photos)
    return 100.0 * genders["female"] / (genders["female"] + genders["male"])


def test_import_label_analyze_categories(study_root, tmp_path, capsys):
    dalle, dalle_truth = _dalle_manifest(tmp_path / "dalle_out")
    mj, mj_truth = _midjourney_jsonl(tmp_path / "mj_out")
    assert main(["-q", "import-images", str(study_root), str(dalle)]) == 0
    assert main(["-q", "import-images", str(study_root), str(mj), "--model", "midjourney"]) == 0
    out = capsys.readouterr().out
    assert "import-images" in out
    n = sum(len(v) for m in RULE.values() for v in m.values())
    rows = _rows(
        study_root,
        "SELECT i.image_id, i.model_id, i.prompt_id, i.occupation, i.path, i.prompt_text, i.seed, "
        "i.origin, m.sha256, m.image_index, m.metadata, m.source_line FROM images i "
        "JOIN imported_images m USING (image_id) ORDER BY i.image_id",
    )
    assert len(rows) == n
    for iid, model, pid, occ, path, text, seed, origin, sha, index, meta, line in rows:
        assert iid.startswith(f"imp:{model}:{pid}:{index}:") and sha.startswith(
            iid.rsplit(":", 1)[1]
        )
        assert pid == f"bafis/direct/en:1:{occ}" and origin.startswith("import:")
        assert Path(path).is_absolute() and Path(path).is_file()
        if model == "dall-e-3":
            assert "smiling" in json.loads(meta)["revised_prompt"] and seed is None
            assert normalise(text) == f"A photo of a {occ}." and line >= 2
        else:
            assert seed == 7 + index and text == f"A photo of a {occ}."
    provenance = _rows(
        study_root,
        "SELECT source_path, layout, source_sha256, n_added FROM image_imports ORDER BY layout",
    )
    assert [(Path(p).name, lay, a) for p, lay, _s, a in provenance] == [
        ("manifest.csv", "csv", 6), ("mj.jsonl", "jsonl", 6)
    ]  # fmt: skip
    import hashlib

    assert provenance[0][2] == hashlib.sha256(dalle.read_bytes()).hexdigest()

    # the same sources again: nothing added
    before = _counts(study_root)
    assert main(["-q", "import-images", str(study_root), str(dalle)]) == 0
    assert main(["-q", "import-images", str(study_root), str(mj), "--model", "midjourney"]) == 0
    after = _counts(study_root)
    assert after[0] == before[0] and after[2] == before[2] and after[1] == before[1] + 2
    assert "already" in capsys.readouterr().out

    # label, analyze, categories through the CLI
    for stage in ("label", "analyze", "categories", "report"):
        assert main(["-q", stage, str(study_root)]) == 0, stage
    page = (study_root / "report" / "report.html").read_text(encoding="utf-8")
    assert 'id="images-elsewhere"' in page and "cannot be regenerated" in page
    assert "manifest.csv" in page and "mj.jsonl" in page
    capsys.readouterr()
    truth = {}
    for folder, files in ((dalle.parent, dalle_truth), (mj.parent, mj_truth)):
        truth.update({str((folder / rel).resolve()): GENDER[p] for rel, p in files.items()})
    labels = _rows(
        study_root,
        "SELECT i.path, l.label FROM images i JOIN labels l USING (image_id) "
        "WHERE i.origin LIKE 'import:%'",
    )
    assert len(labels) == n
    assert {path: lab for path, lab in labels} == truth
    cat = {
        (m, lang): (nf, nm, pf)
        for m, lang, nf, nm, pf in _rows(
            study_root,
            "SELECT model_id, language, n_female, n_male, percent_female FROM category_distribution "
            "WHERE category = 'Healthcare & Social Services'",
        )
    }
    for model, by_occ in RULE.items():
        photos = by_occ["nurse"] + by_occ["doctor"]
        f = sum(GENDER[p] == "female" for p in photos)
        assert cat[(model, "en")][:2] == (f, len(photos) - f)
        assert cat[(model, "en")][2] == pytest.approx(_wilson_free_share(photos))

    # battles between the two imported models
    assert main(["status", str(study_root)]) == 0
    status = capsys.readouterr().out
    assert "imported 6 image(s) of dall-e-3 from " in status and "cannot be regenerated" in status
    assert main(["-q", "battles", "export", str(study_root), "--n", "4"]) == 0
    pairs = _rows(study_root, "SELECT pair_id, prompt_id, model_a, model_b FROM battle_pairs")
    assert pairs and all({a, b} == {"dall-e-3", "midjourney"} for _p, _q, a, b in pairs)
    assert (study_root / "battles" / "battles.html").is_file()
    votes = tmp_path / "votes_ann.csv"  # the annotator prefers dall-e-3's image every time
    lines = ["item,pair_id,prompt_id,aspect,vote,annotator"]
    for item, (pair, prompt, a, _b) in enumerate(pairs, 1):
        lines.append(f"{item},{pair},{prompt},bias,{'A' if a == 'dall-e-3' else 'B'},Ann")
    votes.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["-q", "battles", "import", str(study_root), str(votes), "--rounds", "50"]) == 0
    ranks = dict(
        _rows(study_root, "SELECT model_id, rank FROM preference_ratings WHERE aspect = 'bias'")
    )
    assert ranks == {"dall-e-3": 1, "midjourney": 2}
    assert main(["-q", "report", str(study_root)]) == 0
    capsys.readouterr()


def test_amplification_g_of_an_imported_model(study_root, tmp_path, capsys):
    """Template prompts (the paper's G): %female per imported model and prompt from `analyze`."""
    folder = tmp_path / "sdxl"
    con = duckdb.connect(str(study_root / "study.duckdb"), read_only=True)
    prompts = con.execute(
        "SELECT prompt_id, text, occupation FROM prompts WHERE prompt_set NOT LIKE 'bafis%' "
        "ORDER BY prompt_id LIMIT 2"
    ).fetchall()
    con.close()
    rows, expect, n = [], {}, 0
    for pid, _text, _occ in prompts:
        photos = [FEMALE, MALE, MALE, MALE]
        for i, name in enumerate(photos):
            _photo_file(folder / f"{i}_{pid.replace(':', '_')}.png", name, n)
            n += 1
            rows.append({"file": f"{i}_{pid.replace(':', '_')}.png", "prompt_id": pid})
        expect[pid] = _wilson_free_share(photos)
    manifest = folder / "sdxl.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    assert main(["-q", "import-images", str(study_root), str(manifest), "--model", "sdxl"]) == 0
    assert main(["-q", "label", str(study_root)]) == 0
    assert main(["-q", "analyze", str(study_root)]) == 0
    capsys.readouterr()
    got = dict(
        _rows(
            study_root,
            "SELECT prompt_id, percent_female FROM percent_female WHERE model_id = 'sdxl'",
        )
    )
    for pid, value in expect.items():
        assert got[pid] == pytest.approx(value)


def test_folder_per_prompt_layout(study_root, tmp_path, capsys):
    root = tmp_path / "dalleval"
    _photo_file(root / "A photo of a nurse." / "0.png", FEMALE, 0)
    _photo_file(root / "A photo of a nurse." / "1.png", MALE, 1)
    _photo_file(root / "A_photo_of_a_doctor." / "0.png", MALE, 2)
    (root / "A photo of a nurse." / "notes.txt").write_text("not an image", encoding="utf-8")
    assert main(["-q", "import-images", str(study_root), str(root)]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["-q", "import-images", str(study_root), str(root), "--model", "dalleval-sd"]) == 0
    got = _rows(
        study_root,
        "SELECT i.prompt_id, m.image_index FROM images i JOIN imported_images m USING (image_id) "
        "ORDER BY 1, 2",
    )
    assert got == [
        ("bafis/direct/en:1:doctor", 0),
        ("bafis/direct/en:1:nurse", 0),
        ("bafis/direct/en:1:nurse", 1),
    ]


def _bafis(folder: Path) -> Path:
    """A BAFIS-style dataset: metadata.json + <key>.png; key 3's file is missing and key 4's
    file is not an image."""
    meta = {}
    entries = [
        ("nurse", "dall-e-3", "en", "A photo of a nurse.", FEMALE),
        ("nurse", "dall-e-3", "de", "Ein Foto eines Pflegers.", MALE),
        ("carpenter", "midjourney", "en", "A photo of a carpenter.", MALE),
        ("doctor", "midjourney", "en", "A photo of a doctor.", None),
        ("doctor", "dall-e-3", "en", None, "text"),
    ]
    for key, (occ, model, lang, prompt, name) in enumerate(entries):
        meta[str(key)] = {
            "occupation": occ, "model": model, "prompt_group": "bafis_occupations_direct",
            "language": lang, "prompt": prompt,
        }  # fmt: skip
        if name == "text":
            (folder / f"{key}.png").write_bytes(b"this is not a PNG")
        elif name is not None:
            _photo_file(folder / f"{key}.png", name, key)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return folder


def test_bafis_metadata_json(study_root, tmp_path, capsys):
    folder = _bafis(tmp_path / "bafis_dataset")
    before = _counts(study_root)
    assert main(["-q", "import-images", str(study_root), str(folder), "--strict"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "metadata.json:" in err and "missing_file" in err
    assert _counts(study_root) == before  # nothing imported
    assert main(["-q", "import-images", str(study_root), str(folder)]) == 0
    out = capsys.readouterr().out
    assert "missing_file" in out and "not_an_image" in out
    got = _rows(
        study_root,
        "SELECT model_id, prompt_id FROM images WHERE origin LIKE 'import:%' ORDER BY 1, 2",
    )
    assert got == [
        ("dall-e-3", "bafis/direct/de:1:nurse"),
        ("dall-e-3", "bafis/direct/en:1:nurse"),
        ("midjourney", "bafis/direct/en:1:carpenter"),
    ]
    skips = _rows(study_root, "SELECT reason, source_line FROM import_skips ORDER BY 1")
    assert [r for r, _ in skips] == ["missing_file", "not_an_image"]
    assert all(line and line > 1 for _, line in skips)  # the entry's line in metadata.json


def test_changed_bytes_are_reported_not_relabelled(study_root, tmp_path, capsys):
    dalle, truth = _dalle_manifest(tmp_path / "dalle_out")
    assert main(["-q", "import-images", str(study_root), str(dalle)]) == 0
    before = _counts(study_root)
    first = next(iter(truth))
    _photo_file(dalle.parent / first, MALE, 99)  # another picture under the same name
    capsys.readouterr()
    assert main(["-q", "import-images", str(study_root), str(dalle)]) == 0
    out = capsys.readouterr().out
    assert "changed_since_import" in out and first.split("/")[-1] in out
    after = _counts(study_root)
    assert after[0] == before[0] and after[2] == before[2]  # no new image, none replaced
    assert _rows(study_root, "SELECT reason FROM import_skips") == [("changed_since_import",)]
    (dalle.parent / list(truth)[1]).unlink()
    assert main(["-q", "import-images", str(study_root), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "dropped 1: changed_since_import" in out and "dropped 1: missing_file" in out
    assert f"{len(truth)} in, {len(truth) - 2} out" in out
    assert main(["-q", "import-images", str(study_root)]) == 2  # no source, no --verify


def _bad(folder: Path, kind: str) -> tuple[Path, int]:
    """A manifest with one problem; the line it is on."""
    folder.mkdir(parents=True, exist_ok=True)
    _photo_file(folder / "a.png", FEMALE, 0)
    _photo_file(folder / "b.png", MALE, 1)
    good = {"file": "a.png", "prompt": "A photo of a nurse.", "model": "m"}
    second = {"file": "b.png", "prompt": "A photo of a doctor.", "model": "m"}
    if kind == "unknown_prompt":
        second["prompt"] = "A photo of an astronaut."
    elif kind == "missing_file":
        second["file"] = "gone.png"
    elif kind == "duplicate_line":
        second = dict(good)
    elif kind == "escaping_path":
        second["file"] = "../outside.png"
    elif kind == "unknown_prompt_id":
        second = {"file": "b.png", "prompt_id": "bafis/direct/en:1:astronaut", "model": "m"}
    if kind in ("bad_json", "unknown_prompt_id"):
        path = folder / "m.jsonl"
        lines = [json.dumps(good), json.dumps(second)]
        if kind == "bad_json":
            lines[1] = '{"file": "b.png", "prompt": "A photo of a doctor."'
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return path, 2
    path = folder / "m.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["file", "prompt", "model"])
        writer.writeheader()
        writer.writerows([good, second])
    if kind == "non_utf8":
        path.write_bytes(path.read_bytes().replace(b"doctor", b"doct\xf6r"))
    return path, 3


@pytest.mark.parametrize(
    "kind",
    ["unknown_prompt", "unknown_prompt_id", "missing_file", "duplicate_line", "non_utf8",
     "escaping_path", "bad_json"],
)  # fmt: skip
def test_bad_manifest_is_one_line_naming_file_and_line(study_root, tmp_path, capsys, kind):
    manifest, line = _bad(tmp_path / "bad", kind)
    before = _counts(study_root)
    args = ["-q", "import-images", str(study_root), str(manifest)]
    assert main([*args, "--strict"] if kind == "missing_file" else args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{manifest}:{line}" in err, err
    assert _counts(study_root) == before


@pytest.mark.parametrize("suffix", [".csv", ".tsv"])
def test_unterminated_quote_names_the_line_where_the_field_starts(
    study_root, tmp_path, capsys, suffix
):
    """Issue 33: the csv reader took the open field to the end of the file, and the error
    then named a later line and a wrong problem ("no 'model'")."""
    folder = tmp_path / "open"
    folder.mkdir()
    for i, name in enumerate(("a.png", "b.png", "c.png")):
        _photo_file(folder / name, FEMALE, i)
    sep = "\t" if suffix == ".tsv" else ","
    rows = [
        ["file", "prompt", "model"],
        ["a.png", '"A photo of a nurse."', "m"],
        ["b.png", '"A photo of a nurse.', "m"],  # line 3: no closing quote
        ["c.png", "A photo of a nurse.", "m"],
    ]
    manifest = folder / f"m{suffix}"
    manifest.write_text("".join(sep.join(r) + "\n" for r in rows), encoding="utf-8")
    before = _counts(study_root)
    assert main(["-q", "import-images", str(study_root), str(manifest)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"{manifest}:3: unterminated quote" in err, err
    assert _counts(study_root) == before


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('a,b\n1,"x ""quoted"" y"\n2,"two\nlines"\n', None),  # closed, "" and a line break
        ('a,b\n1,"x""\n2,3\n', 2),  # "" is a quote, not the end
        ('a,b\n1,"two\nlines\n', 2),
        ('a,b\n1,5" screen\n2,"x"y\n', None),  # a quote inside a field is text
        ('a,b\n1,"x"', None),  # closed at the end of the file
        ('a,b\n1,"', 2),
        ('a,"b\r\n1,2\r\n', 1),
    ],
)
def test_unterminated_quote_follows_the_csv_reader(text, line):
    assert unterminated_quote(text, ",") == line


def test_readers_are_pure_and_match_prompts(study_root, tmp_path):
    """read_source + resolve_entries without writing: the indexes a manifest without `index`
    gets, and a text of two prompts needing a prompt id."""
    from corpus_audit.core.store import Study

    folder = tmp_path / "pure"
    rows = [{"file": f"{i}.png", "prompt": "A photo of a nurse.", "model": "m"} for i in range(3)]
    for i in range(3):
        _photo_file(folder / f"{i}.png", FEMALE, i)
    manifest = folder / "p.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    source = read_source(manifest)
    with Study.open(study_root, read_only=True) as study:
        items = resolve_entries(source.entries, study_prompts(study))
    assert [i.index for i in items] == [0, 1, 2]
    assert {i.prompt.prompt_id for i in items} == {"bafis/direct/en:1:nurse"}


# -- a PST study fed by an import, through the CLI to the report ------------------------------
def _alone(name: str):
    """One person beside grey (600 x 300), as tests/test_pst_study.py's singles."""
    import numpy as np
    from pst_fixtures import person

    return np.ascontiguousarray(np.concatenate([person(name), np.full_like(person(name), 128)], 1))


def test_pst_study_fed_by_an_import_runs_to_the_report(tmp_path, capsys):
    from pst_fixtures import LABEL_THRESHOLD, side_by_side

    root = tmp_path / "pst"
    builtin = Path(__file__).parents[2] / "corpus_audit/methods/lexicon/data/pst/roles_en.csv"
    lines = builtin.read_text(encoding="utf-8").splitlines()
    roles = tmp_path / "roles.csv"
    keep = [lines[0]] + [x for x in lines[1:] if x.split(",")[0] in ("carpenter", "nurse")]
    roles.write_text("\n".join(keep) + "\n", encoding="utf-8")
    assert main(["-q", "init", str(root), "--kind", "pst"]) == 0
    settings = [f"pst.roles={roles}", 'pst.kinds=["single", "paired"]', "pst.faircritic_rounds=1",
                "label.face_model=full_range", f"label.threshold={LABEL_THRESHOLD}",
                "analysis.bootstrap=200"]  # fmt: skip
    assert main(["-q", "config", "set", str(root), *settings]) == 0
    assert main(["-q", "pst_prompts", str(root)]) == 0
    prompts = _rows(
        root,
        "SELECT prompt_id, kind, left_stereotype, right_stereotype FROM pst_prompts ORDER BY 1",
    )
    other = {"male": "female", "female": "male"}
    who = {"male": "man", "female": "woman"}
    folder = tmp_path / "dalle3_export"
    folder.mkdir()
    manifest_lines, truth = [], {}
    for pid, kind, left, right in prompts:
        for index in range(2):
            follows = index == 0 or kind == "single"  # image 1 of a pair: neither follows
            lg = left if follows else other[left]
            if kind == "single":
                pixels = _alone(who[lg])
                truth[(pid, index, "single")] = lg
            else:
                rg = right if follows else other[right]
                pixels = side_by_side(who[lg], who[rg])
                truth[(pid, index, "left")], truth[(pid, index, "right")] = lg, rg
            name = f"{pid.replace(':', '_')}_{index}.png"
            Image.fromarray(pixels).save(folder / name)
            manifest_lines.append(json.dumps({"file": name, "prompt_id": pid, "index": index}))
    (folder / "images.jsonl").write_text("\n".join(manifest_lines), encoding="utf-8")
    code = main(["-q", "import-images", str(root), str(folder / "images.jsonl"),
                 "--model", "dall-e-3 (export)"])  # fmt: skip
    assert code == 0
    capsys.readouterr()
    assert main(["-q", "run", str(root)]) == 0
    out = capsys.readouterr().out
    assert "FairCritic needs a generator it can call again" in out

    people = _rows(
        root,
        "SELECT pp.prompt_id, m.image_index, pp.side, pp.perceived, pp.stereotype "
        "FROM pst_people pp JOIN imported_images m USING (image_id)",
    )
    # the two images of a single prompt are the same picture (same bytes): still two images
    assert len(people) == len(truth)
    assert {(p, i, s): g for p, i, s, g, _ in people} == truth
    # SS per kind from the known photos: 100 * (2 * share following - 1)
    follows: dict[tuple[str, str], list[bool]] = {}
    kinds = {pid: (kind, pid.split(":")[2]) for pid, kind, _l, _r in prompts}
    for pid, _i, _s, perceived, stereotype in people:
        follows.setdefault(kinds[pid], []).append(perceived == stereotype)
    scores = dict(
        ((k, v), ss)
        for k, v, ss in _rows(
            root,
            "SELECT kind, variant, ss FROM pst_scores WHERE side = 'image' AND scope = 'overall' "
            "AND group_name = 'all'",
        )
    )
    for key, values in follows.items():
        assert scores[key] == pytest.approx(100 * (2 * sum(values) / len(values) - 1)), key
    assert (root / "report" / "pst.html").is_file()
    html = (root / "report" / "pst.html").read_text(encoding="utf-8")
    assert "dall-e-3 (export)" in html or "pst" in html


def test_a_reordered_manifest_adds_nothing(study_root, tmp_path, capsys):
    """Without `index`, the order gives the index; the same files in another order are the
    same images (known by path and bytes), not new ones."""
    folder = tmp_path / "order"
    rows = []
    for i, name in enumerate([FEMALE, MALE, FEMALE]):
        _photo_file(folder / f"{i}.png", name, i)
        rows.append(
            json.dumps({"file": f"{i}.png", "prompt": "A photo of a doctor.", "model": "m"})
        )
    manifest = folder / "m.jsonl"
    manifest.write_text("\n".join(rows), encoding="utf-8")
    assert main(["-q", "import-images", str(study_root), str(manifest)]) == 0
    before = _counts(study_root)
    manifest.write_text("\n".join(reversed(rows)), encoding="utf-8")
    assert main(["-q", "import-images", str(study_root), str(manifest)]) == 0
    after = _counts(study_root)
    assert (after[0], after[2]) == (before[0], before[2]) == (before[0], 3)
    capsys.readouterr()


def _cli(*args: str, timeout: float) -> subprocess.CompletedProcess:
    """The CLI in a subprocess, killed at ``timeout`` (a hang fails the test, bounded)."""
    return subprocess.run(
        [sys.executable, "-m", "corpus_audit.cli", "-q", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )


def test_a_fifo_is_refused_by_its_type_before_any_read(study_root, tmp_path):
    """Issue 33 (High 3): a FIFO named by a manifest, or put in place of an imported file,
    blocked `import-images` and `--verify` forever (the bytes were read before the type was
    checked). Now it is refused as 'not a regular file (a FIFO)' and the command ends."""
    dalle, truth = _dalle_manifest(tmp_path / "dalle_out")
    first, second = list(truth)[:2]
    (dalle.parent / first).unlink()
    os.mkfifo(dalle.parent / first)
    done = _cli("import-images", str(study_root), str(dalle), timeout=7)
    assert done.returncode == 0, done.stderr
    assert "unreadable" in done.stdout and "not a regular file (a FIFO)" in done.stdout
    assert _rows(study_root, "SELECT reason FROM import_skips") == [("unreadable",)]
    (dalle.parent / second).unlink()
    os.mkfifo(dalle.parent / second)  # an imported file replaced by a FIFO
    done = _cli("import-images", str(study_root), "--verify", timeout=7)
    assert done.returncode == 0, done.stderr
    assert "dropped 1: unreadable" in done.stdout and "a FIFO" in done.stdout


def _held_writer(fifo: Path) -> int | None:
    """The FIFO's write end, opened without blocking, when a process has it open for reading
    (None otherwise). Held open and never written, a reader's ``read`` blocks for good."""
    try:
        return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader
        return None


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("verify", [False, True], ids=["import", "verify"])
def test_a_fifo_never_outlives_a_signal(study_root, tmp_path, verify, sig, code):
    """Issue 33 (High 3, "SIGINT and SIGTERM end every command within 5 s in each hang
    case"): on 45cffa0's parent 7afa816 a FIFO in an import blocked a hashing thread in
    ``read`` and the pool's shutdown waited on it: Ctrl-C and SIGTERM did not end
    `import-images` or `--verify`. The command runs in a subprocess; once it opens the FIFO
    (a writer is held open, so a read would block) or after it ends, a still-running
    command must end within 5 s of the signal, with one line and no traceback."""
    dalle, truth = _dalle_manifest(tmp_path / "dalle_out")
    first = list(truth)[0]
    args = ["import-images", str(study_root), str(dalle)]
    if verify:
        assert main(["-q", *args]) == 0
        args = ["import-images", str(study_root), "--verify"]
    fifo = dalle.parent / first
    fifo.unlink()
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "corpus_audit.cli", "-q", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    held = None
    try:
        deadline = time.monotonic() + 30
        while held is None and proc.poll() is None and time.monotonic() < deadline:
            held = _held_writer(fifo)
            time.sleep(0.01)
        if proc.poll() is None:  # it opened the FIFO and still runs: the signal must end it
            time.sleep(0.5)
            start = time.monotonic()
            proc.send_signal(sig)
            try:
                out, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                pytest.fail(f"still running 5 s after signal {sig}")
            assert time.monotonic() - start < 5
            assert proc.returncode in (0, code), err
        else:  # it refused the FIFO and ended on its own
            out, err = proc.communicate(timeout=5)
            assert proc.returncode == 0, err
            assert "a FIFO" in out
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 1, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if held is not None:
            os.close(held)


def _bytes_read(pid: int) -> int:
    """Bytes the process has read so far (``rchar`` of /proc/PID/io), 0 once it is gone."""
    try:
        text = Path(f"/proc/{pid}/io").read_text()
    except OSError:
        return 0
    return int(
        next(v for k, _, v in (line.partition(": ") for line in text.splitlines()) if k == "rchar")
    )


@pytest.mark.parametrize(
    "verify, sig, code",
    [(False, signal.SIGINT, 130), (False, signal.SIGTERM, 143), (True, signal.SIGINT, 130)],
    ids=["import-SIGINT", "import-SIGTERM", "verify-SIGINT"],
)
def test_a_huge_file_being_hashed_never_outlives_a_signal(study_root, tmp_path, verify, sig, code):
    """Issue 33 (High 3, Medium "hash by streaming"): a 16 GiB file (sparse: a PNG header,
    then a hole) is hashed in blocks; Ctrl-C or SIGTERM in the middle must end `import-images`
    and `--verify` within 5 s, not when every queued file has been hashed."""
    dalle, truth = _dalle_manifest(tmp_path / "dalle_out")
    huge = dalle.parent / list(truth)[0]
    args = ["import-images", str(study_root), str(dalle)]
    if verify:
        assert main(["-q", *args]) == 0
        args = ["import-images", str(study_root), "--verify"]
    head = huge.read_bytes()
    with huge.open("wb") as fh:
        fh.write(head)
        fh.truncate(16 * 2**30)
    proc = subprocess.Popen(
        [sys.executable, "-m", "corpus_audit.cli", "-q", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    try:
        deadline = time.monotonic() + 60
        while _bytes_read(proc.pid) < 2**30 and proc.poll() is None:
            assert time.monotonic() < deadline, "the huge file was not read within 60 s"
            time.sleep(0.02)
        assert proc.poll() is None, proc.communicate()  # 16 GiB take longer than this
        start = time.monotonic()
        proc.send_signal(sig)
        try:
            _, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 5 s after signal {sig}")
        assert time.monotonic() - start < 5 and proc.returncode == code, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        huge.unlink()


@pytest.mark.parametrize(
    "kind, words",
    [
        ("symlink_loop", "cannot be resolved"),
        ("nul", "contains a NUL character"),
        ("index_3e9", "index must be <= 2,147,483,647, got 3000000000"),
        ("seed_1e20", "seed must be <= 9,223,372,036,854,775,807"),
        ("deep_bafis", "nested too deeply"),
        ("deep_jsonl", "nested too deeply"),
        ("folder_symlink_out", "resolves outside the manifest's folder"),
        ("folder_index_3e9", "index must be <= 2,147,483,647"),
    ],
)
def test_hostile_sources_are_one_line_not_a_traceback(tmp_path, kind, words):
    """Issue 33 (Medium): a symlink loop, a NUL in a path, an index of 3e9, a seed of 1e20, a
    100k-deep JSON and (folder layout) a symlink out of the folder gave tracebacks or were
    followed; each is now a ManifestError naming the source, raised by the pure readers."""
    folder = tmp_path / "src"
    folder.mkdir()
    record = {"file": "a.png", "prompt": "A photo of a nurse.", "model": "m"}
    source = folder / "m.jsonl"
    if kind == "symlink_loop":
        (folder / "loop.png").symlink_to(folder / "loop.png")
        record["file"] = "loop.png"
    elif kind == "nul":
        record["file"] = "a\x00b.png"
    elif kind == "index_3e9":
        record["index"] = 3_000_000_000
    elif kind == "seed_1e20":
        record["seed"] = 10**20
    if kind == "deep_bafis":
        source = folder / "metadata.json"
        source.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    elif kind == "deep_jsonl":
        source.write_text("[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    elif kind.startswith("folder_"):
        source = folder
        (folder / "A photo of a nurse.").mkdir()
        outside = tmp_path / "outside.png"
        _photo_file(outside, FEMALE, 0)
        name = "0.png" if kind == "folder_symlink_out" else "3000000000.png"
        (folder / "A photo of a nurse." / name).symlink_to(outside)
        if kind == "folder_index_3e9":  # a real file inside, with a huge index
            (folder / "A photo of a nurse." / name).unlink()
            _photo_file(folder / "A photo of a nurse." / name, FEMALE, 0)
    else:
        source.write_text(json.dumps(record) + "\n", encoding="utf-8")
    with pytest.raises(ManifestError, match=words) as err:
        read_source(source, "m" if kind.startswith("folder_") else None)
    assert len(str(err.value).splitlines()) == 1 and str(folder) in str(err.value)


def test_a_large_file_is_hashed_by_streaming(tmp_path):
    """Issue 33 (Medium): each hashing thread read a whole file (a 1 GB file x 8 threads).
    Python's allocations while checking a 96 MB file stay within a few blocks."""
    import hashlib
    import tracemalloc

    from corpus_audit.stages.import_images import check_file

    big = tmp_path / "big.png"
    _photo_file(big, FEMALE, 0)
    with big.open("ab") as fh:  # a real PNG header, then 96 MB of trailing bytes
        for _ in range(96):
            fh.write(bytes(2**20))
    tracemalloc.start()
    try:
        checked = check_file(big, 89_478_485)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert checked.n_bytes == big.stat().st_size and checked.width == 256
    assert checked.sha256 == hashlib.sha256(big.read_bytes()).hexdigest()
    assert peak < 16 * 2**20, peak


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="reads /proc/self/io (Linux)")
def test_a_large_file_that_is_no_image_is_told_by_its_first_block(tmp_path):
    """Issue 33 (Medium, "check the header before reading"): a 64 MB file that is no image is
    refused after its first block, not read to its end (it was hashed whole first); a file
    that may be an image (a real PNG header) is still read and hashed whole."""
    from corpus_audit.stages.import_images import check_file

    junk = tmp_path / "video.png"
    with junk.open("wb") as fh:
        fh.write(b"\x00\x00\x00\x18ftypmp42")  # an MP4 named .png
        for _ in range(64):
            fh.write(bytes(2**20))
    before = _bytes_read(os.getpid())
    checked = check_file(junk, 89_478_485)
    read = _bytes_read(os.getpid()) - before
    assert (checked.reason, checked.sha256, checked.n_bytes) == (
        "not_an_image", None, junk.stat().st_size
    )  # fmt: skip
    assert "not a recognised image" in checked.detail
    assert read < 4 * 2**20, read  # one block (1 MiB), not 64 MiB

    image = tmp_path / "big.png"
    _photo_file(image, FEMALE, 0)
    with image.open("ab") as fh:
        fh.write(bytes(8 * 2**20))
    before = _bytes_read(os.getpid())
    checked = check_file(image, 89_478_485)
    assert checked.reason is None and _bytes_read(os.getpid()) - before >= image.stat().st_size


def test_an_import_named_like_a_generated_model_is_refused(study_root, tmp_path, capsys):
    """Issue 33 (Medium): an imported model named like one of generate.models was pooled with
    the generated images without a word."""
    dalle, _truth = _dalle_manifest(tmp_path / "dalle_out")
    assert main(["-q", "config", "set", str(study_root), "generate.models=['Dall-E-3']"]) == 0
    before = _counts(study_root)
    assert main(["-q", "import-images", str(study_root), str(dalle)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "generate.models entry 'Dall-E-3'" in err, err
    assert _counts(study_root) == before
    assert main(["-q", "import-images", str(study_root), str(dalle), "--model", "dalle3-ext"]) == 0


def _jsonl(folder: Path, name: str, records: list[dict]) -> Path:
    manifest = folder / name
    manifest.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    return manifest


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_a_truncated_photo_is_caught_by_strict(study_root, tmp_path, capsys, fmt):
    """Issue 33 (round 4, open): a JPEG or PNG cut in half keeps a valid header, so the header
    check passed it, even under --strict; --strict now decodes every file in full."""
    folder = tmp_path / "cut"
    folder.mkdir()
    suffix = ".jpg" if fmt == "JPEG" else ".png"
    for i, name in enumerate([FEMALE, MALE]):
        Image.fromarray(photo(name)).save(folder / f"{i}{suffix}", format=fmt)
    whole = (folder / f"1{suffix}").read_bytes()
    (folder / f"1{suffix}").write_bytes(whole[: len(whole) // 2])  # the test truncates it
    manifest = _jsonl(
        folder,
        "m.jsonl",
        [{"file": f"{i}{suffix}", "prompt": "A photo of a nurse.", "model": "m"} for i in (0, 1)],
    )
    before = _counts(study_root)
    assert main(["-q", "import-images", str(study_root), str(manifest), "--strict"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"m.jsonl:2: unreadable: {folder / f'1{suffix}'}" in err and "truncated" in err, err
    assert _counts(study_root) == before  # nothing written
    (folder / f"1{suffix}").write_bytes(whole)  # the whole file imports under --strict
    assert main(["-q", "import-images", str(study_root), str(manifest), "--strict"]) == 0
    assert _counts(study_root)[0] == before[0] + 2


def test_model_names_differing_only_in_case_are_refused(study_root, tmp_path, capsys):
    """Issue 33 (round 4, open): image ids lower-case the model name, so 'DALL-E-3' and
    'dall-e-3' shared ids: the second model's image of the same bytes was taken for the first
    one's and silently not imported. Names whose ids would collide are refused, one line."""
    folder = tmp_path / "case"
    _photo_file(folder / "a.png", FEMALE, 0)
    _photo_file(folder / "b.png", FEMALE, 0)  # the same bytes in two files: two images
    both = _jsonl(folder, "both.jsonl", [
        {"file": "a.png", "prompt": "A photo of a nurse.", "model": "DALL-E-3"},
        {"file": "b.png", "prompt": "A photo of a nurse.", "model": "dall-e-3"},
    ])  # fmt: skip
    before = _counts(study_root)
    assert main(["-q", "import-images", str(study_root), str(both)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "both.jsonl:2" in err, err
    assert "'dall-e-3'" in err and "'DALL-E-3'" in err and "only in case" in err, err
    assert _counts(study_root) == before
    # across two imports: the study's own model name is the one to use
    one = _jsonl(folder, "one.jsonl", [{"file": "a.png", "prompt": "A photo of a nurse."}])
    assert main(["-q", "import-images", str(study_root), str(one), "--model", "DALL-E-3"]) == 0
    middle = _counts(study_root)
    two = _jsonl(
        folder, "two.jsonl", [{"file": "b.png", "prompt": "A photo of a nurse.", "index": 1}]
    )
    assert main(["-q", "import-images", str(study_root), str(two), "--model", "dall-e-3"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "two.jsonl:1" in err and "'DALL-E-3'" in err, err
    assert _counts(study_root) == middle
    assert main(["-q", "import-images", str(study_root), str(two), "--model", "DALL-E-3"]) == 0
    ids = _rows(study_root, "SELECT image_id FROM images WHERE model_id = 'DALL-E-3'")
    assert len(ids) == 2  # the same bytes twice under one prompt: two images


def test_the_same_image_under_two_prompts_is_said_and_refused_by_strict(
    study_root, tmp_path, capsys
):
    """Issue 33 (round 4, open): a file imported for one prompt was accepted again for another
    prompt by a later import (and a copy of its bytes too) without a word: one picture counted
    for two occupations. Such an image is named (``same_image_other_prompt``, with the first
    image), and --strict refuses it. (Imported without --strict: a fixture or a provider's
    placeholder may well repeat a picture, and the label stage sees it anyway.)"""
    folder = tmp_path / "dup"
    _photo_file(folder / "a.png", FEMALE, 0)
    _photo_file(folder / "other.png", MALE, 1)
    first = _jsonl(folder, "first.jsonl", [
        {"file": "a.png", "prompt": "A photo of a nurse.", "model": "m"}
    ])  # fmt: skip
    assert main(["-q", "import-images", str(study_root), str(first)]) == 0
    (folder / "copy.png").write_bytes((folder / "a.png").read_bytes())
    second = _jsonl(folder, "second.jsonl", [
        {"file": "a.png", "prompt": "A photo of a doctor.", "model": "m"},
        {"file": "copy.png", "prompt": "A photo of a carpenter.", "model": "m"},
        {"file": "other.png", "prompt": "A photo of a doctor.", "model": "m"},
    ])  # fmt: skip
    before = _counts(study_root)
    assert main(["-q", "import-images", str(study_root), str(second), "--strict"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "second.jsonl:1: same_image_other_prompt" in err, err
    assert "prompt bafis/direct/en:1:nurse" in err and "--strict" in err, err
    assert _counts(study_root) == before
    capsys.readouterr()
    assert main(["-q", "import-images", str(study_root), str(second)]) == 0
    out = capsys.readouterr().out
    assert "2 imported image(s) have the bytes of an image of another prompt" in out, out
    assert "second.jsonl:1: same_image_other_prompt" in out, out
    assert "second.jsonl:2: same_image_other_prompt" in out, out
    assert "second.jsonl:3" not in out
    # within one import too: the second prompt's copy is named
    _photo_file(folder / "x.png", MALE, 7)
    (folder / "y.png").write_bytes((folder / "x.png").read_bytes())
    third = _jsonl(folder, "third.jsonl", [
        {"file": "x.png", "prompt": "A photo of a doctor.", "model": "n"},
        {"file": "y.png", "prompt": "A photo of a nurse.", "model": "n"},
    ])  # fmt: skip
    assert main(["-q", "import-images", str(study_root), str(third), "--strict"]) == 2
    err = capsys.readouterr().err.strip()
    assert "third.jsonl:2: same_image_other_prompt" in err and "x.png" in err, err
