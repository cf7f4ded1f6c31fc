"""The battle page: one self-contained HTML file on which an annotator votes A / B / tie.

The page (``templates/battles.html.j2``, Jinja2 with autoescape: every prompt, id and title is
HTML-escaped) needs nothing but itself: images are inlined as JPEG ``data:`` URIs (longest
side ``thumbnail_px``), the style sheet and the script are inline, and a
Content-Security-Policy (``default-src 'none'; img-src data:; ...``, as on the validation
sheet) stops it from loading anything else. It shows one block per battle (prompt text, image
A, image B) with one row of A / B / tie per aspect; keys answer the highlighted row and move
on (A/1/left = A, B/2/right = B, T/3/down = tie, up/Backspace = back, N = skip, D =
download; Enter leaves the name field). The download is built in the browser: ``votes_<name>.csv`` with
:data:`corpus_audit.methods.preferences.battles.SHEET_COLUMNS`. Model names are not on the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corpus_audit.core.errors import BattleError
from corpus_audit.core.fileio import write_text_atomic
from corpus_audit.methods.preferences.battles import ASPECT_TEXT, ASPECTS, write_pairs
from corpus_audit.report.thumbs import resolve, thumbnail_uri
from corpus_audit.report.visible import finalize

TEMPLATE = "battles.html.j2"
THUMBNAIL_PX = 384
PAGE_NAME = "battles.html"
PAIRS_NAME = "pairs.csv"


@dataclass
class BattlePage:
    """What :func:`export_page` wrote: the page, the pair manifest, how many battles, and how
    many images could not be read (shown as "image unavailable")."""

    page: Path
    pairs: Path
    battles: int
    unreadable: int


def _uri(path: str, root: Path | None, px: int, max_pixels: int) -> str | None:
    full = resolve(root, path) if root is not None else Path(path).expanduser()
    return thumbnail_uri(full, size=px, max_pixels=max_pixels, quality=85)


def render_page(
    pairs: Any,
    *,
    aspects: Sequence[str] = ASPECTS,
    title: str = "Which image is better?",
    root: Path | None = None,
    thumbnail_px: int = THUMBNAIL_PX,
    max_pixels: int = 89_478_485,
) -> tuple[str, int]:
    """``(html, unreadable)``: the page for ``pairs`` (a :func:`draw_battles` frame), asking
    ``aspects`` (a subset of :data:`ASPECTS`, in that order on the page).

    Relative image paths are resolved against ``root`` (e.g. the study directory); an image
    that cannot be decoded is shown as "image unavailable" and counted.
    """
    import jinja2

    unknown = [a for a in aspects if a not in ASPECT_TEXT]
    if unknown or not aspects:
        raise BattleError(
            f"battles: aspect(s) {', '.join(map(repr, unknown)) or 'none'} not among "
            f"{', '.join(ASPECTS)}"
        )
    battles, unreadable = [], 0
    for rec in pairs.to_dict("records"):
        uri_a = _uri(rec["path_a"], root, thumbnail_px, max_pixels)
        uri_b = _uri(rec["path_b"], root, thumbnail_px, max_pixels)
        unreadable += (uri_a is None) + (uri_b is None)
        text = rec.get("prompt_text")
        battles.append(
            {
                "item": int(rec["item"]),
                "pair_id": rec["pair_id"],
                "prompt_id": rec["prompt_id"],
                "prompt_text": None if text is None or text != text else text,
                "uri_a": uri_a,
                "uri_b": uri_b,
            }
        )
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("corpus_audit.report", "templates"),
        autoescape=True,  # prompts and ids are data
        finalize=finalize,  # control characters in them shown as escapes
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    questions = [
        {"key": a, "label": ASPECT_TEXT[a][0], "question": ASPECT_TEXT[a][1]}
        for a in ASPECTS
        if a in aspects
    ]
    html = env.get_template(TEMPLATE).render(
        title=title, battles=battles, aspects=questions, px=thumbnail_px
    )
    return html, unreadable


def export_page(pairs: Any, out_dir: Path, **options: Any) -> BattlePage:
    """Write ``battles.html`` (:func:`render_page` with ``options``: aspects, title, root,
    thumbnail_px, max_pixels) and the pair manifest ``pairs.csv`` into ``out_dir`` (each
    written to a temporary name and renamed, so a failed run leaves the previous files
    whole)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html, unreadable = render_page(pairs, **options)
    page = out / PAGE_NAME
    write_text_atomic(page, html)
    manifest = write_pairs(pairs, out / PAIRS_NAME)
    return BattlePage(page, manifest, len(pairs), unreadable)
