"""Build a small study with real tables for the analysis and report tests.

The analysis reads tables, so these tests fill them directly (the stages that normally do
it are tested in their own files): real captions from ``../shared/data`` (LAION-400M and
COCO), the real LAION caption with an ``<a href>`` tag, one caption with a
``<script>alert(1)</script>`` tag (the only made-up caption), real photos of people that ship
with scikit-image / matplotlib as the image files, and perceived-gender labels chosen so
each occupation has a known %female. Gender indicators of the fixture captions come from a
plain word rule (the real indicators stage uses spaCy + gender-guesser).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb

OCCUPATIONS = ("chef", "cook", "doctor", "student", "teacher")
SCRIPT_CAPTION = "Teacher of the year <script>alert(1)</script> award"
HREF_PREFIX = "<a href='http://nymetroparents.com/listing/Yale-New-Haven"
MODELS = ("sd-tiny-a", "sd-tiny-b")
CLASSIFIER = "clip:ViT-L-14/openai"

# Target share of female labels among each occupation's training images, and per model and
# prompt template among its generated images (10 per prompt).
TRAIN_FEMALE = {"chef": 0.25, "cook": 0.3, "doctor": 0.4, "student": 0.5, "teacher": 0.75}
GEN_FEMALE = {
    "sd-tiny-a": {"chef": 0.1, "cook": 0.2, "doctor": 0.2, "student": 0.6, "teacher": 0.9},
    "sd-tiny-b": {"chef": 0.3, "cook": 0.6, "doctor": 0.1, "student": 0.5, "teacher": 0.8},
}
_MALE = re.compile(r"\b(he|his|him|man|men|male|boy|boys|gentleman)\b")
_FEMALE = re.compile(r"\b(she|her|hers|woman|women|female|girl|girls|lady|ladies)\b")


def indicator_label(text: str) -> str:
    """The fixture's indicator rule: gender words and pronouns only."""
    low = text.lower()
    m, f = bool(_MALE.search(low)), bool(_FEMALE.search(low))
    return "both" if m and f else "male" if m else "female" if f else "none"


def real_captions(paths: list[Path], per_occupation: int = 10) -> list[dict[str, Any]]:
    """Captions of the shared corpus files that mention an occupation (word boundaries)."""
    con = duckdb.connect()
    out: list[dict[str, Any]] = []
    pattern = r"\b(" + "|".join(o + "s?" for o in OCCUPATIONS) + r")\b"
    for file_id, path in enumerate(sorted(paths)):
        col = "TEXT" if "laion" in path.name else "caption"
        url = "URL" if "laion" in path.name else "coco_url"
        rows = con.execute(
            f"SELECT file_row_number, {col}, {url} FROM read_parquet(?, file_row_number=true) "
            f"WHERE regexp_matches(lower({col}), ?) ORDER BY file_row_number",
            [str(path), pattern],
        ).fetchall()
        for row, text, link in rows:
            out.append(
                {
                    "caption_id": (file_id << 40) | int(row),
                    "text": text,
                    "url": link,
                    "source_file": str(path),
                    "row_in_file": int(row),
                }
            )
        if "laion" in path.name:
            (row, text, link) = con.execute(
                f"SELECT file_row_number, {col}, {url} FROM read_parquet(?, file_row_number=true)"
                f" WHERE starts_with({col}, ?)",
                [str(path), HREF_PREFIX],
            ).fetchone()
            out.append(
                {
                    "caption_id": (file_id << 40) | int(row),
                    "text": text,
                    "url": link,
                    "source_file": str(path),
                    "row_in_file": int(row),
                    "force": "doctor",  # placed in doctor's samples to exercise escaping
                }
            )
    out.append(
        {
            "caption_id": (9 << 40) | 0,
            "text": SCRIPT_CAPTION,
            "url": None,
            "source_file": "synthetic-xss.csv",
            "row_in_file": 0,
        }
    )
    con.close()
    return out


def picture_files(root: Path) -> dict[str, list[str]]:
    """Real photos of people (scikit-image, matplotlib), 96 px, saved under ``root/imgs``."""
    import matplotlib.cbook
    import numpy as np
    import skimage.data
    from PIL import Image

    folder = root / "imgs"
    folder.mkdir(parents=True, exist_ok=True)
    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as fh:
        hopper = Image.open(fh).convert("RGB")
    pictures = {
        "female": [Image.fromarray(skimage.data.astronaut()), hopper],
        "male": [Image.fromarray(skimage.data.camera()).convert("RGB")],
    }
    faces = skimage.data.lfw_subset()[:4]
    pictures["male"] += [
        Image.fromarray((f * 255).astype(np.uint8)).convert("RGB") for f in faces[:2]
    ]
    out: dict[str, list[str]] = {"female": [], "male": []}
    for gender, images in pictures.items():
        for i, img in enumerate(images):
            img = img.copy()
            img.thumbnail((96, 96))
            name = f"imgs/{gender}_{i}.png"
            img.save(root / name)
            out[gender].append(name)
    return out


def build(study: Any, corpus: list[Path], *, with_images: bool = True) -> dict[str, Any]:
    """Fill ``study``'s tables; returns what was inserted (for assertions)."""
    from corpus_audit.methods.lexicon import load_occupations, load_prompt_set, render_prompts

    con = study.con
    captions = real_captions(corpus)
    by_occ: dict[str, list[dict[str, Any]]] = {o: [] for o in OCCUPATIONS}
    for c in captions:
        low = c["text"].lower()
        for occ in OCCUPATIONS:
            mentioned = c.get("force") == occ or re.search(rf"\b{occ}s?\b", low)
            extra = c["source_file"] == "synthetic-xss.csv" or c.get("force")
            if mentioned and (len(by_occ[occ]) < 10 or extra):
                by_occ[occ].append(c)
    used = {c["caption_id"]: c for occ in by_occ.values() for c in occ}
    con.executemany(
        "INSERT INTO captions (caption_id, text, url, source_file, row_in_file) VALUES (?, ?, ?, ?, ?)",
        [
            [c["caption_id"], c["text"], c["url"], c["source_file"], c["row_in_file"]]
            for c in used.values()
        ],
    )
    con.executemany(
        "INSERT INTO mentions (caption_id, occupation, matched_form) VALUES (?, ?, ?)",
        [[c["caption_id"], occ, occ] for occ, cs in by_occ.items() for c in cs],
    )
    labels = {cid: indicator_label(c["text"]) for cid, c in used.items()}
    con.executemany(
        "INSERT INTO indicators (caption_id, label, triggers) VALUES (?, ?, ?)",
        [[cid, lab, "" if lab == "none" else lab] for cid, lab in labels.items()],
    )
    occupations = [o for o in load_occupations() if o.name in OCCUPATIONS]
    prompt_set = load_prompt_set()
    prompts = render_prompts(prompt_set, occupations)
    con.executemany(
        "INSERT INTO prompts (prompt_id, prompt_set, template_id, occupation, text) VALUES (?, ?, ?, ?, ?)",
        [
            [p["prompt_id"], p["prompt_set"], p["template_id"], p["occupation"], p["text"]]
            for p in prompts
        ],
    )
    samples = []
    for occ, cs in by_occ.items():
        ordered = sorted(cs, key=lambda c: c["caption_id"])
        for rank, c in enumerate(ordered, start=1):
            samples.append(["keyword", occ, None, c["caption_id"], rank, None])
        plain = [c for c in ordered if labels[c["caption_id"]] == "none"]
        for rank, c in enumerate(plain, start=1):
            samples.append(["no_indicators", occ, None, c["caption_id"], rank, None])
        for t in (1, 2, 3, 4):
            pid = prompt_set.prompt_id(t, occ)
            rotated = ordered[t - 1 :] + ordered[: t - 1]
            if occ == "teacher" and t == 1:  # the script caption is the top neighbour
                rotated.sort(key=lambda c: c["source_file"] != "synthetic-xss.csv")
            top = rotated[: 9 if occ == "teacher" else 8]  # teacher: most nn captions
            for rank, c in enumerate(top, start=1):
                samples.append(["nn", occ, pid, c["caption_id"], rank, 0.9 - 0.03 * rank])
            for rank, c in enumerate([c for c in top if labels[c["caption_id"]] == "none"], 1):
                samples.append(
                    ["nn_no_indicators", occ, pid, c["caption_id"], rank, 0.9 - 0.03 * rank]
                )
    con.executemany(
        "INSERT INTO samples (strategy, occupation, prompt_id, caption_id, rank, score) VALUES (?, ?, ?, ?, ?, ?)",
        samples,
    )
    # Similarity diagnostics as the neighbors stage writes them (values set for the fixture:
    # keyword subsets far from the prompt, nn subsets close, as on LAION 0.385 vs 0.704).
    diagnostics = []
    for occ in OCCUPATIONS:
        for t in (1, 2, 3, 4):
            pid = prompt_set.prompt_id(t, occ)
            for strategy, base in (("keyword", 0.38), ("nn", 0.70), ("nn_no_indicators", 0.68)):
                diagnostics.append([strategy, occ, pid, 8, base + 0.01 * t, False])
    con.executemany(
        "INSERT INTO similarity_diagnostics (strategy, occupation, prompt_id, n_captions, "
        "mean_similarity, short_of_k) VALUES (?, ?, ?, ?, ?, ?)",
        diagnostics,
    )
    info: dict[str, Any] = {"by_occ": by_occ, "prompts": prompts, "labels": labels}
    _record_runs(study, "select", len(used), len(samples))
    _record_runs(study, "indicators", len(used), len(labels))
    _record_runs(study, "neighbors", len(samples), len(diagnostics))
    if with_images:
        info["images"] = _images(study, by_occ, prompt_set)
    return info


def _images(study: Any, by_occ: dict[str, list[dict]], prompt_set: Any) -> dict[str, Any]:
    pics = picture_files(study.root)
    images: list[list[Any]] = []
    face: list[list[Any]] = []
    labels: list[list[Any]] = []

    def add(
        image_id,
        source,
        gender,
        *,
        caption_id=None,
        prompt_id=None,
        occupation=None,
        model=None,
        prompt_text=None,
        seed=None,
        strategy=None,
        dropped=None,
    ):
        pool = pics[gender if gender in pics else "male"]
        path = pool[(seed or caption_id or 0) % len(pool)]
        images.append(
            [
                image_id,
                source,
                caption_id,
                prompt_id,
                occupation,
                path,
                model,
                prompt_text,
                seed,
                False,
                strategy,
            ]
        )
        if dropped:
            face.append([image_id, "mediapipe", 0, False, dropped])
            return
        face.append([image_id, "mediapipe", 1, True, None])
        p = {"female": 0.97, "male": 0.03, "ambiguous": 0.6}[gender]
        labels.append([image_id, CLASSIFIER, p, gender, 0.9])

    seen: set[int] = set()
    for occ, cs in by_occ.items():
        ordered = sorted(cs, key=lambda c: c["caption_id"])
        n_female = round(TRAIN_FEMALE[occ] * len(ordered))
        for i, c in enumerate(ordered):
            if c["caption_id"] in seen:
                continue
            seen.add(c["caption_id"])
            gender = "female" if i < n_female else "male"
            dropped = "no_face" if i == len(ordered) - 1 else None
            add(
                f"train:{c['caption_id']}",
                "training",
                gender,
                caption_id=c["caption_id"],
                occupation=occ,
                dropped=dropped,
            )
    for model in MODELS:
        for occ in OCCUPATIONS:
            for t in (1, 2, 3, 4):
                pid = prompt_set.prompt_id(t, occ)
                share = GEN_FEMALE[model][occ] + (0.1 if t == 4 else 0.0)
                for seed in range(10):
                    gender = "female" if seed < round(share * 10) else "male"
                    dropped = "many_faces" if seed == 9 else None
                    if model == "sd-tiny-b" and occ == "cook":
                        dropped = "small_face"  # a generated set with zero labelled images
                    add(
                        f"gen:{model}:{pid}:{seed}",
                        "generated",
                        gender,
                        prompt_id=pid,
                        occupation=occ,
                        model=model,
                        prompt_text=f"prompt {pid}",
                        seed=seed,
                        dropped=dropped,
                    )
    # Captions as prompts (model a): two images per keyword caption of chef and teacher; the
    # generated gender follows the caption's indicator when it has one.
    for occ in ("chef", "teacher"):
        for c in by_occ[occ]:
            lab = indicator_label(c["text"])
            for k in range(2):
                gender = lab if lab in ("male", "female") else ("female" if k else "male")
                add(
                    f"gen:sd-tiny-a:cap:{c['caption_id']}:{k}",
                    "generated",
                    gender,
                    caption_id=c["caption_id"],
                    occupation=occ,
                    model="sd-tiny-a",
                    prompt_text=c["text"],
                    seed=k,
                    strategy="keyword",
                )
    con = study.con
    con.executemany(
        "INSERT INTO images (image_id, source, caption_id, prompt_id, occupation, path, "
        "model_id, prompt_text, seed, nsfw, strategy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        images,
    )
    con.executemany(
        "INSERT INTO face_filter (image_id, detector, n_faces, kept, reason) VALUES (?, ?, ?, ?, ?)",
        face,
    )
    con.executemany(
        "INSERT INTO labels (image_id, classifier, p_female, label, threshold) "
        "VALUES (?, ?, ?, ?, ?)",
        labels,
    )
    n_train = sum(1 for i in images if i[1] == "training")
    _record_runs(study, "images", n_train, n_train)
    _record_runs(study, "generate", len(images) - n_train, len(images) - n_train)
    dropped: dict[str, int] = {}
    for f in face:
        if f[4]:
            dropped[f[4]] = dropped.get(f[4], 0) + 1
    _record_runs(study, "label", len(images), len(labels), dropped)
    return {"images": images, "labels": labels, "face": face}


def _record_runs(
    study: Any, name: str, rows_in: int, rows_out: int, dropped: dict[str, int] | None = None
) -> None:
    """Bookkeeping rows as the real stages would leave them (for the report's funnel)."""
    with study.stage(name) as run:
        run.rows_in, run.rows_out = rows_in, rows_out
        for reason, n in (dropped or {}).items():
            run.drop(reason, n)
        run.provenance["fixture"] = "tests/study_builder.py"


def build_reported(root: Path, corpus: list[Path], *, with_images: bool = True) -> Path:
    """Create a study at ``root``, fill it, run ``analyze`` and ``report``; returns the
    report path. The study is closed afterwards (reopen it with ``Study.open``)."""
    from corpus_audit.core.pipeline import init_study
    from corpus_audit.report import report
    from corpus_audit.stages.analyze import analyze

    study = init_study(root, [str(corpus[0])], overrides={"analysis": {"bootstrap": 200}})
    try:
        build(study, corpus, with_images=with_images)
        if with_images:
            # One generated set whose files are corrupt: thumbnails counted as unreadable.
            (root / "imgs" / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n not really")
            study.con.execute(
                "UPDATE images SET path = 'imgs/broken.png' "
                "WHERE model_id = 'sd-tiny-b' AND occupation = 'cook'"
            )
        analyze(study, progress=False)
        run = report(study, progress=False)
    finally:
        study.close()
    return Path(run.outputs["report"])
