"""The rows each source adds (pure but for reading what the study holds already): images, their
provenance and the files skipped, with the checks that refuse an import before anything is
written (model names that clash, ``--strict``)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from corpus_audit.backends.generators import model_slug
from corpus_audit.core.errors import ManifestError, printable
from corpus_audit.core.store import StageRun, Study
from corpus_audit.stages.import_images.files import Checked, check_all
from corpus_audit.stages.import_images.manifest import Source
from corpus_audit.stages.import_images.match import Item

SAME_IMAGE = "same_image_other_prompt"  # the note on an image whose bytes another prompt has
SHOWN_TWINS = 10  # such notes printed one by one (then a count)


def image_id(model: str, prompt_id: str, index: int, sha256: str) -> str:
    """The id of an imported image: model, prompt, index and the file's bytes (two images of
    one prompt with the same bytes are two images, not one)."""
    return f"imp:{model_slug(model)}:{prompt_id}:{index}:{sha256[:16]}"


def plans(
    study: Study,
    run: StageRun,
    read: list[Source],
    matched: list[Item],
    model: str | None,
    strict: bool,
    *,
    progress: bool = False,
) -> list[dict]:
    """Every file checked (decoded whole with ``strict``) and each source's plan of rows."""
    by_source: dict[Path, list[Item]] = {}
    for item in matched:
        by_source.setdefault(item.entry.source, []).append(item)
    paths = [item.entry.file for item in matched]  # --strict: each decoded whole
    checked = check_all(study, run, paths, whole=strict, progress=progress)
    results = dict(zip((id(i) for i in matched), checked, strict=True))
    known = _known_files(study, {str(i.entry.file) for i in matched})
    first_of = _known_bytes(study, {c.sha256 for c in checked if c.sha256})
    return [
        _plan(study, source, by_source.get(source.path, []), results, known, first_of, model)
        for source in read
    ]


def refuse_any_skip(plans: list[dict]) -> None:
    """``--strict``: a file skipped (but for one changed since its import) or a picture
    imported for two prompts refuses the whole import."""
    bad = [s for p in plans for s in p["skips"] if s[4] != "changed_since_import"]
    if bad:
        _iid, where, _line, file, reason, detail = bad[0]
        raise ManifestError(f"{where}: {reason}: {file} ({detail}); nothing imported (--strict)")
    twins = [t for p in plans for t in p["twins"]]
    if twins:
        raise ManifestError(f"{twins[0]}; nothing imported (--strict)")


def count(run: StageRun, plans: list[dict]) -> None:
    """The run's counts, drops, per-source summary and the twins' messages."""
    for p in plans:
        run.rows_in += p["n_items"]
        run.rows_out += len(p["images"])
        for _iid, where, _line, file, reason, detail in p["skips"]:
            run.drop(reason)
            run.messages.append(f"{where}: {reason}: {file}" + (f" ({detail})" if detail else ""))
        run.summary.append(
            {"source": p["source"].path.name, "layout": p["source"].layout, "entries": p["n_items"],
             "added": len(p["images"]), "already_imported": p["n_present"], "dropped": len(p["skips"])}
        )  # fmt: skip
    twins = [t for p in plans for t in p["twins"]]
    if twins:
        run.messages.append(
            f"{len(twins)} imported image(s) have the bytes of an image of another prompt (one "
            "picture counted for two prompts: check the manifest; --strict refuses them):"
        )
        run.messages += twins[:SHOWN_TWINS]
        if len(twins) > SHOWN_TWINS:
            run.messages.append(f"... and {len(twins) - SHOWN_TWINS} more")


def refuse_generated_names(study: Study, items: Sequence[Item]) -> None:
    """An imported model named like one of ``generate.models`` (case aside) would be pooled
    with the images the study generates: refused, one line naming the model and the entry."""
    generated = {m.casefold(): m for m in study.config.generate.models}
    for item in items:
        clash = generated.get(item.model.casefold())
        if clash is not None:
            raise ManifestError(
                f"{item.entry.where}: model {printable(item.model)!r} is the name of "
                f"generate.models entry {printable(clash)!r}: its images would be pooled with "
                "the generated ones; give the import another name (--model NAME)"
            )


def refuse_colliding_names(study: Study, items: Sequence[Item]) -> None:
    """Two model names with one id part (:func:`model_slug` lower-cases: ``DALL-E-3`` and
    ``dall-e-3``) would give their images the same ids, so an image of the second would be
    taken for one of the first and silently not imported: refused, one line naming the entry
    and the name already used (in the study, else earlier in this import). Names are kept
    case-sensitive as given; the first spelling is the one to use again."""
    first: dict[str, tuple[str, str]] = {}  # model slug -> (model name, where it was seen)
    rows = study.con.execute(
        "SELECT DISTINCT model_id FROM images WHERE starts_with(image_id, 'imp:') "
        "AND model_id IS NOT NULL ORDER BY model_id"
    ).fetchall()
    for (name,) in rows:
        first.setdefault(model_slug(name), (name, "already in the study"))
    for item in items:
        seen = first.setdefault(model_slug(item.model), (item.model, f"at {item.entry.where}"))
        if seen[0] != item.model:
            how = (
                "differs only in case from"
                if seen[0].casefold() == item.model.casefold()
                else ("has the same image id part as")
            )
            raise ManifestError(
                f"{item.entry.where}: model {printable(item.model)!r} {how} model "
                f"{printable(seen[0])!r} ({seen[1]}): their images would share ids "
                f"(imp:{model_slug(item.model)}:...); write it {printable(seen[0])!r}, or give "
                "another name (--model NAME)"
            )


def _known_bytes(study: Study, shas: set[str]) -> dict[str, tuple[str, str, str]]:
    """Imported already: sha256 -> (prompt_id, image_id, file) of its first image."""
    if not shas:
        return {}
    rows = study.con.execute(
        "SELECT m.sha256, i.prompt_id, m.image_id, m.file FROM imported_images m "
        "JOIN images i USING (image_id) ORDER BY m.image_id"
    ).fetchall()
    out: dict[str, tuple[str, str, str]] = {}
    for sha, prompt_id, iid, file in rows:
        if sha in shas:
            out.setdefault(sha, (prompt_id, iid, file))
    return out


def _known_files(study: Study, files: set[str]) -> dict[str, list[tuple[str, str]]]:
    """Already imported: file -> [(image_id, sha256)]."""
    if not files:
        return {}
    # every imported row, filtered here: list_contains over a long list is quadratic in DuckDB
    rows = study.con.execute("SELECT file, image_id, sha256 FROM imported_images").fetchall()
    out: dict[str, list[tuple[str, str]]] = {}
    for file, iid, sha in rows:
        if file in files:
            out.setdefault(file, []).append((iid, sha))
    return out


def _plan(
    study: Study,
    source: Source,
    items: Sequence[Item],
    results: dict[int, Checked],
    known: dict[str, list[tuple[str, str]]],
    first_of: dict[str, tuple[str, str, str]],
    model: str | None,
) -> dict[str, Any]:
    """The rows one source adds: images, imported_images, import_skips, image_imports.
    ``first_of`` (sha256 -> prompt, image id and file of the first image with these bytes)
    is shared by the sources of one run and updated with the images this one adds."""
    import_id = uuid.uuid4().hex[:16]
    present_ids = _present_ids(study, items, results)
    images, imported, skips = [], [], []
    twins: list[str] = []  # images whose bytes are an image of another prompt
    n_present = 0
    for item in items:
        e, c = item.entry, results[id(item)]
        file = str(e.file)
        if c.reason is not None:
            skips.append((import_id, e.where, e.line, file, c.reason, c.detail))
            continue
        assert c.sha256 is not None
        before = known.get(file, [])
        changed = _changed_since_import(import_id, item, c.sha256, before)
        if changed is not None:
            skips.append(changed)
            continue
        iid = image_id(item.model, item.prompt.prompt_id, item.index, c.sha256)
        same_file = any(
            sha == c.sha256
            and old_id.startswith(f"imp:{model_slug(item.model)}:{item.prompt.prompt_id}:")
            for old_id, sha in before
        )  # this file, these bytes, this model and prompt: imported before (index aside)
        if iid in present_ids or same_file:
            n_present += 1
            continue
        first = first_of.setdefault(c.sha256, (item.prompt.prompt_id, iid, file))
        if first[0] != item.prompt.prompt_id:  # one picture counted for two prompts: said
            twins.append(
                f"{e.where}: {SAME_IMAGE}: {file} has the bytes (sha256 {c.sha256[:12]}...) of "
                f"image {first[1]} of prompt {first[0]} ({first[2]})"
            )
        present_ids.add(iid)
        image_row, imported_row = _rows(study, item, c, iid, import_id)
        images.append(image_row)
        imported.append(imported_row)
    return {
        "import_id": import_id,
        "source": source,
        "model": model,
        "n_items": len(items),
        "n_present": n_present,
        "images": images,
        "imported": imported,
        "skips": skips,
        "twins": twins,
    }


def _changed_since_import(
    import_id: str, item: Item, sha256: str, before: list[tuple[str, str]]
) -> tuple | None:
    """The skip row of a file imported before (``before``: its image ids and sha256s) whose
    bytes differ now; None when it is new or unchanged."""
    if not before or any(sha == sha256 for _iid, sha in before):
        return None
    e, old = item.entry, before[0][1]
    return (
        import_id, e.where, e.line, str(e.file), "changed_since_import",
        f"sha256 {old[:12]}... at import ({before[0][0]}), now {sha256[:12]}...; the "
        "stored rows and labels are kept: import the new file under another name to add it",
    )  # fmt: skip


def _rows(study: Study, item: Item, c: Checked, iid: str, import_id: str) -> tuple[tuple, tuple]:
    """The ``images`` and ``imported_images`` rows of one new image."""
    e = item.entry
    rel = _study_path(study, e.file)
    image_row = (
        iid, "generated", item.prompt.prompt_id, item.prompt.occupation, rel, item.model,
        e.prompt if e.prompt is not None else item.prompt.text, e.seed, f"import:{import_id}",
    )  # fmt: skip
    imported_row = (
        iid, import_id, str(e.file), c.sha256, c.n_bytes, c.width, c.height, e.line, item.index,
        json.dumps(e.metadata, ensure_ascii=False, sort_keys=True, default=str),
    )  # fmt: skip
    return image_row, imported_row


def _present_ids(study: Study, items: Sequence[Item], results: dict[int, Checked]) -> set[str]:
    ids = [
        image_id(i.model, i.prompt.prompt_id, i.index, results[id(i)].sha256 or "")
        for i in items
        if results[id(i)].sha256
    ]
    if not ids:
        return set()
    rows = study.con.execute("SELECT image_id FROM images WHERE starts_with(image_id, 'imp:')")
    return {r[0] for r in rows.fetchall()} & set(ids)


def _study_path(study: Study, file: Path) -> str:
    """``images.path``: relative to the study when the file is inside it, else absolute."""
    try:
        return file.relative_to(study.root.resolve()).as_posix()
    except ValueError:
        return str(file)
