"""Battles: drawing pairs, the voting page (escaped, self-contained, keyboard), reading votes.

The round trip runs in Debian's headless Chromium (``tests/cdp.py``): the page is opened from
disk, a name is typed, votes are given with real key presses and clicks, the download button is
clicked, and the CSV Chromium saves is read back with ``read_votes``.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from image_fixtures import photo
from PIL import Image

from corpus_audit.core.errors import BattleError
from corpus_audit.methods.preferences.battles import (
    PAIR_COLUMNS,
    VOTE_COLUMNS,
    draw_battles,
    read_pairs,
    read_votes,
)
from corpus_audit.methods.preferences.elo import elo_ratings
from corpus_audit.report.battles_page import export_page, render_page

MODELS = ("sd14", "sd15", "flux")
PROMPTS = ("nurse", "ceo", "plumber", "teacher")
HOSTILE = 'A photo of a <script>alert(1)</script> "nurse" & <img src=x onerror=alert(2)>'


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> pd.DataFrame:
    """Generated-image rows: 3 models x 4 prompts x 2 images (real photos, small JPEGs), plus
    one image of a fourth model and one of a prompt no other model has."""
    root = tmp_path_factory.mktemp("battle_images")
    rows = []
    faces = [photo("astronaut"), photo("camera"), photo("grace")]
    for m, model in enumerate(MODELS):
        for p, prompt in enumerate(PROMPTS):
            for k in range(2):
                path = root / f"{model}_{prompt}_{k}.jpg"
                Image.fromarray(faces[(m + p + k) % 3]).resize((96, 96)).save(path, quality=80)
                rows.append(
                    {
                        "image_id": f"gen:{model}:paper:1:{prompt}:{k}",
                        "model_id": model,
                        "prompt_id": f"paper:1:{prompt}",
                        "path": str(path),
                        "prompt_text": HOSTILE if prompt == "nurse" else f"A photo of a {prompt}",
                    }
                )
    rows.append(dict(rows[0], image_id="gen:solo:x", model_id="solo", prompt_id="paper:1:solo"))
    rows.append(dict(rows[0], image_id="gen:sd14:caption:1", prompt_id=None))  # no prompt
    return pd.DataFrame(rows)


def test_draw_is_balanced_same_prompt_and_reproducible(images):
    pairs = draw_battles(images, 12, seed=7)
    assert list(pairs.columns) == list(PAIR_COLUMNS)
    assert len(pairs) == 12 and list(pairs["item"]) == list(range(1, 13))
    by_id = images.set_index("image_id")
    for row in pairs.to_dict("records"):
        assert row["model_a"] != row["model_b"]
        assert by_id.loc[row["image_a"], "prompt_id"] == row["prompt_id"]
        assert by_id.loc[row["image_b"], "prompt_id"] == row["prompt_id"]
        assert by_id.loc[row["image_a"], "model_id"] == row["model_a"]
    per_pair = Counter(
        tuple(sorted((a, b))) for a, b in zip(pairs.model_a, pairs.model_b, strict=True)
    )
    assert sorted(per_pair.values()) == [4, 4, 4]  # 3 model pairs, equal shares
    for m1, m2 in per_pair:
        sub = pairs[pairs.model_a.isin([m1, m2]) & pairs.model_b.isin([m1, m2])]
        # A/B sides alternate within a model pair: each model is A twice
        assert sorted(Counter(sub.model_a).values()) == [2, 2]
        # all 4 prompts are used before any prompt repeats
        assert sorted(sub.prompt_id) == sorted(f"paper:1:{p}" for p in PROMPTS)
    assert pairs["pair_id"].is_unique and "solo" not in set(pairs.model_a) | set(pairs.model_b)
    shuffled = images.sample(frac=1.0, random_state=3).reset_index(drop=True)
    assert draw_battles(shuffled, 12, seed=7).equals(pairs)  # row order does not matter
    assert not draw_battles(images, 12, seed=8)["pair_id"].equals(pairs["pair_id"])


def test_draw_caps_at_what_exists_and_each_image_once_per_pair(images):
    pairs = draw_battles(images, 1000, seed=1, models=["sd14", "flux"])
    assert len(pairs) == 8  # 4 prompts x 2 images matched rank by rank
    used = Counter(list(pairs.image_a) + list(pairs.image_b))
    assert set(used.values()) == {1}
    assert pairs.attrs["per_pair"] == {"flux vs sd14": 8}
    uneven = draw_battles(
        images[~((images.model_id == "flux") & (images.prompt_id != "paper:1:ceo"))], 9, 2
    )
    counts = Counter(tuple(sorted(p)) for p in zip(uneven.model_a, uneven.model_b, strict=True))
    # flux shares only 'ceo' (2 images): its pairs get 2 each, the rest goes to sd14 vs sd15
    assert counts == {("flux", "sd14"): 2, ("flux", "sd15"): 2, ("sd14", "sd15"): 5}


@pytest.mark.parametrize(
    ("change", "kwargs", "match"),
    [
        (lambda f: f.drop(columns=["path"]), {}, r"lack the column\(s\) path"),
        (lambda f: f[f.model_id == "sd14"], {}, r"at least two models, found 1 \(sd14\)"),
        (
            lambda f: pd.concat([f, f.head(1)]),
            {},
            r"image_id 'gen:sd14:paper:1:nurse:0' appears twice",
        ),
        (lambda f: f, {"models": ["sd14", "mj"]}, r"no images of model\(s\) mj"),
        (lambda f: f, {"n": 0}, r"n must be >= 1"),
    ],
)
def test_draw_errors(images, change, kwargs, match):
    options = {"n": 4, "seed": 0, **kwargs}
    with pytest.raises(BattleError, match=match):
        draw_battles(change(images), options.pop("n"), options.pop("seed"), **options)


def test_page_is_self_contained_escaped_and_blind(images, tmp_path):
    pairs = draw_battles(images, 24, seed=3)  # every match: the hostile prompt is on the page
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff not a jpeg")
    pairs.loc[0, "path_b"] = str(broken)
    html, unreadable = render_page(pairs, aspects=("bias", "prompt_alignment"), title="T <b>&")
    assert unreadable == 1 and html.count("image unavailable") == 1
    assert "default-src 'none'; img-src data:" in html
    assert "<title>T &lt;b&gt;&amp;</title>" in html
    assert "<script>alert(1)" not in html and "onerror=alert(2)>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    srcs = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert srcs and all(s.startswith("data:image/jpeg;base64,") for s in srcs)
    assert html.count("<script>") == 1  # the page's own script only
    for model in MODELS:  # annotators judge blind: no model names anywhere
        assert model not in html
    assert html.count('data-aspect="bias"') == 24 and 'data-aspect="image_quality"' not in html
    with pytest.raises(BattleError, match=r"aspect\(s\) 'beauty' not among"):
        render_page(pairs, aspects=("beauty",))


def test_manifest_round_trip(images, tmp_path):
    pairs = draw_battles(images, 6, seed=3)
    written = export_page(pairs, tmp_path / "out")
    assert written.page.name == "battles.html" and written.battles == 6
    back = read_pairs(written.pairs)
    for column in PAIR_COLUMNS:
        assert list(back[column]) == list(pairs[column]), column


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def exported(images, tmp_path) -> pd.DataFrame:
    return draw_battles(images, 4, seed=3)


def test_read_votes_codes_and_joins(exported, tmp_path):
    p1, p2 = exported.pair_id[0], exported.pair_id[1]
    sheet = write(
        tmp_path / "votes_ann.csv",
        "item,pair_id,prompt_id,aspect,vote,annotator\n"
        f"1,{p1},{exported.prompt_id[0]},bias,A,ann\n"
        f"1,{p1},{exported.prompt_id[0]},image_quality,b,ann\n"
        f"2,{p2},,bias,Tie,ann\n"
        f"2,{p2},,image_quality,,ann\n",
    )
    other = write(tmp_path / "bob.csv", f"pair_id,aspect,vote\n{p1},bias,B\n")
    votes = read_votes([sheet, other], exported)
    assert list(votes.columns) == list(VOTE_COLUMNS)
    assert list(votes["vote"]) == [0, 1, 2, 1]
    assert list(votes["annotator"]) == ["ann", "ann", "ann", "bob"]  # bob: from the file name
    assert list(votes["line"]) == [2, 3, 4, 2]
    first = votes.iloc[0]
    assert (first.model_a, first.model_b) == (exported.model_a[0], exported.model_b[0])


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("pair_id,aspect\n", r"needs the column\(s\) vote"),
        ("pair_id,aspect,vote\n{p},bias,maybe\n", r":2: vote 'maybe' is not A, B or tie"),
        ("pair_id,aspect,vote\n{p},beauty,A\n", r":2: aspect 'beauty' is not one of"),
        (
            "pair_id,aspect,vote\n\np999,bias,A\n",
            r":3: pair_id 'p999' is not in the exported pairs",
        ),
        (
            "pair_id,prompt_id,aspect,vote\n{p},paper:9:x,bias,A\n",
            r":2: prompt_id 'paper:9:x' does not match",
        ),
        (
            "pair_id,aspect,vote\n{p},bias,A\n{p},bias,B\n",
            r":3: 'bad' voted on .* twice \(also .*bad.csv:2\)",
        ),
        ("pair_id,aspect,vote\n{p},bias,A,extra\n", r":2: 4 fields, the header has 3"),
        ('pair_id,aspect,vote\n{p},bias,"A\n', r":2: not valid CSV"),
        ("pair_id,aspect,vote\n{p},bias,\x01A\n", r":2: vote '\\x01A' is not A, B or tie"),
    ],
)
def test_bad_vote_rows_name_file_and_line(exported, tmp_path, body, match):
    path = write(tmp_path / "bad.csv", body.format(p=exported.pair_id[0]))
    with pytest.raises(BattleError, match=match) as info:
        read_votes([path], exported)
    assert str(path) in str(info.value)


def test_bad_vote_files(exported, tmp_path):
    with pytest.raises(BattleError, match="file not found"):
        read_votes([tmp_path / "missing.csv"], exported)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("pair_id,aspect,vote,annotator\np,bias,A,Jos\xe9\n".encode("latin-1"))
    with pytest.raises(BattleError, match="not UTF-8"):
        read_votes([latin], exported)
    bad = write(tmp_path / "pairs.csv", "item,pair_id\n1,p1\n")
    with pytest.raises(BattleError, match=r"not a pair manifest: no column\(s\) prompt_id"):
        read_pairs(bad)
    header = ",".join(PAIR_COLUMNS) + "\n"
    write(bad, header + "1,p1,q,,m1,m1,i1,i2,a.jpg,b.jpg\n")
    with pytest.raises(BattleError, match=r"pairs.csv:2: model_a and model_b are both 'm1'"):
        read_pairs(bad)
    write(bad, header + "x,p1,q,,m1,m2,i1,i2,a.jpg,b.jpg\n")
    with pytest.raises(BattleError, match=r"pairs.csv:2: item 'x' is not a whole number"):
        read_pairs(bad)


def test_click_through_in_chromium_downloads_the_votes(images, tmp_path):
    from cdp import Browser

    pairs = draw_battles(images, 3, seed=3)
    page = export_page(pairs, tmp_path / "out", aspects=("bias", "image_quality"))
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with Browser(tmp_path / "profile", downloads) as browser:
        browser.open(page.page.as_uri())
        assert browser.evaluate("document.images.length") == 6
        assert browser.evaluate(
            "Array.prototype.every.call(document.images, function (i) {"
            " return i.complete && i.naturalWidth > 0; })"
        )
        assert browser.evaluate("document.scripts.length") == 1
        browser.click("#annotator")
        browser.type_text("Ann, O'Tator")
        browser.press("Enter")  # leaves the name field: keys vote again
        # battle 1: bias = A (key a), quality = B (right arrow); battle 2: bias = tie (t),
        # then back up (up arrow) and change it to B (2); quality = A (1);
        # battle 3: bias skipped (n), quality = tie by mouse click on its radio button.
        for key in ("a", "ArrowRight", "t", "ArrowUp", "2", "1", "n"):
            browser.press(key)
        browser.click('#battle-3 fieldset[data-aspect="image_quality"] input[value="tie"]')
        assert browser.evaluate("document.getElementById('progress').textContent") == (
            "5 of 6 answered"
        )
        browser.press("d")
        saved = browser.wait_download()
        assert browser.problems() == []
    assert saved.name == "votes_Ann_O_Tator.csv"
    lines = saved.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "item,pair_id,prompt_id,aspect,vote,annotator"
    assert len(lines) == 7 and lines[5].split(",")[4] == ""  # battle 3 bias unanswered
    votes = read_votes([saved], read_pairs(page.pairs))
    got = [(v.pair_id, v.aspect, v.vote, v.annotator) for v in votes.itertuples()]
    ids = list(pairs["pair_id"])
    assert got == [
        (ids[0], "bias", 0, "Ann  O'Tator"),  # the comma in the name becomes a space
        (ids[0], "image_quality", 1, "Ann  O'Tator"),
        (ids[1], "bias", 1, "Ann  O'Tator"),
        (ids[1], "image_quality", 0, "Ann  O'Tator"),
        (ids[2], "image_quality", 2, "Ann  O'Tator"),
    ]
    ratings = elo_ratings(votes)  # the votes feed the ratings directly
    assert set(ratings["aspect"]) == {"bias", "image_quality"}
