"""`corpus-audit battles import DIR FILE.json`: the BAFIS arena's published votes (the real
file) and LMSYS-style files in a study, the leaderboard per aspect and aspect x language
checked against computations written here (plain loops for Elo and the pair counts, a
minorisation-maximisation iteration for Bradley-Terry), and bad records rejected with the
study unchanged."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from corpus_audit.cli import main
from corpus_audit.core.pipeline import init_study
from corpus_audit.core.store import Study

ROUNDS = 200
ASPECT_KEYS = {
    "bias_vote": "bias",
    "quality_vote": "image_quality",
    "alignment_vote": "prompt_alignment",
}
WINNERS = {0: "model_a", 1: "model_b", 2: "tie", 3: "tie (bothbad)"}


@pytest.fixture(scope="module")
def votes_path(shared_data: Path) -> Path:
    return shared_data / "bafis_arena" / "bafis_arena_votes.json"


@pytest.fixture(scope="module")
def records(votes_path: Path) -> list[dict]:
    return json.loads(votes_path.read_text(encoding="utf-8"))


def _new_study(root: Path, laion: Path) -> Path:
    init_study(root, [str(laion)]).close()
    return root


def _cli(*args: str) -> int:
    return main(["-q", *args])


def _rows(root: Path, sql: str) -> list[dict]:
    with Study.open(root) as study:
        cur = study.con.execute(sql)
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]


def _state(root: Path) -> tuple:
    """Everything an import writes, to compare before / after."""
    return tuple(
        tuple(tuple(r.values()) for r in _rows(root, f"SELECT * FROM {t} ORDER BY ALL"))
        for t in ("arena_votes", "arena_ratings", "arena_pairs")
    )


@pytest.fixture(scope="module")
def imported(tmp_path_factory, laion_path, votes_path) -> Path:
    root = _new_study(tmp_path_factory.mktemp("arena") / "study", laion_path)
    assert _cli("battles", "import", str(root), str(votes_path), "--rounds", str(ROUNDS)) == 0
    return root


# -- independent computations -----------------------------------------------------------------
def _battles(records: list[dict], aspect: str, language: str) -> list[dict]:
    """The answered votes of one aspect (and language, or ``all``) in createdAt order."""
    key = next(k for k, v in ASPECT_KEYS.items() if v == aspect)
    out = [
        {"model_a": r["model_a"], "model_b": r["model_b"], "vote": int(r[key])}
        for r in sorted(records, key=lambda r: r["createdAt"])
        if r[key] is not None and language in ("all", r["language"])
    ]
    return out


def _plain_elo(battles: list[dict]) -> dict[str, float]:
    """METHODS §3 in a plain loop: k 4, scale 400, base 10, initial 1000; 2 and 3 draw."""
    rating: dict[str, float] = defaultdict(lambda: 1000.0)
    for b in battles:
        a, o = b["model_a"], b["model_b"]
        e_a = 1 / (1 + 10 ** ((rating[o] - rating[a]) / 400))
        e_b = 1 / (1 + 10 ** ((rating[a] - rating[o]) / 400))
        s_a = {0: 1.0, 1: 0.0}.get(b["vote"], 0.5)
        rating[a] += 4 * (s_a - e_a)
        rating[o] += 4 * (1 - s_a - e_b)
    return dict(rating)


def _mm_bradley_terry(battles: list[dict]) -> dict[str, float]:
    """Hunter's MM iteration for Bradley-Terry with ties as half a win each:
    p_i <- W_i / sum_j n_ij / (p_i + p_j); on the Elo scale, mean 1000."""
    models = sorted({b["model_a"] for b in battles} | {b["model_b"] for b in battles})
    wins = dict.fromkeys(models, 0.0)
    games: dict[tuple[str, str], int] = defaultdict(int)
    for b in battles:
        s = {0: 1.0, 1: 0.0}.get(b["vote"], 0.5)
        wins[b["model_a"]] += s
        wins[b["model_b"]] += 1 - s
        games[b["model_a"], b["model_b"]] += 1
        games[b["model_b"], b["model_a"]] += 1
    p = dict.fromkeys(models, 1.0)
    for _ in range(20_000):
        new = {
            i: wins[i] / sum(games[i, j] / (p[i] + p[j]) for j in models if j != i) for i in models
        }
        norm = math.exp(sum(math.log(v) for v in new.values()) / len(new))
        new = {i: v / norm for i, v in new.items()}
        done = max(abs(math.log(new[i] / p[i])) for i in models) < 1e-13
        p = new
        if done:
            break
    return {i: 1000 + 400 * math.log10(p[i]) for i in models}


def _plain_pairs(battles: list[dict]) -> dict[tuple[str, str], dict[str, int]]:
    out: dict[tuple[str, str], dict[str, int]] = {}
    for b in battles:
        for me, other, win, lose in (
            (b["model_a"], b["model_b"], 0, 1),
            (b["model_b"], b["model_a"], 1, 0),
        ):
            c = out.setdefault((me, other), {"wins": 0, "losses": 0, "ties": 0, "bothbad": 0})
            if b["vote"] == win:
                c["wins"] += 1
            elif b["vote"] == lose:
                c["losses"] += 1
            else:
                c["ties"] += 1
                c["bothbad"] += b["vote"] == 3
    return out


GROUPS = [(a, lang) for a in ASPECT_KEYS.values() for lang in ("all", "en", "de")]


# -- the real file ----------------------------------------------------------------------------
def test_every_answered_vote_is_stored_per_aspect_and_pair(imported, records):
    per_aspect = {
        r["aspect"]: r["n"]
        for r in _rows(imported, "SELECT aspect, count(*) AS n FROM arena_votes GROUP BY 1")
    }
    # the README's counts of answered votes, and the same counted here
    assert per_aspect == {"bias": 454, "image_quality": 456, "prompt_alignment": 454}
    for key, aspect in ASPECT_KEYS.items():
        assert per_aspect[aspect] == sum(r[key] is not None for r in records)
    stored = {
        (r["aspect"], r["model_a"], r["model_b"], r["vote"]): r["n"]
        for r in _rows(
            imported,
            "SELECT aspect, model_a, model_b, vote, count(*) AS n FROM arena_votes GROUP BY ALL",
        )
    }
    expected: dict[tuple, int] = defaultdict(int)
    for r in records:
        for key, aspect in ASPECT_KEYS.items():
            if r[key] is not None:
                expected[aspect, r["model_a"], r["model_b"], int(r[key])] += 1
    assert stored == dict(expected)
    # both tie kinds are kept, with their outcome names
    kinds = _rows(imported, "SELECT DISTINCT vote, outcome FROM arena_votes ORDER BY vote")
    assert [(k["vote"], k["outcome"]) for k in kinds] == list(WINNERS.items())
    prov = _rows(imported, "SELECT DISTINCT format, record FROM arena_votes WHERE record = 459")
    assert prov == [{"format": "bafis", "record": 459}]


@pytest.mark.parametrize(("aspect", "language"), GROUPS)
def test_elo_bt_and_pairs_match_independent_computations(imported, records, aspect, language):
    battles = _battles(records, aspect, language)
    ratings = {
        r["model_id"]: r
        for r in _rows(
            imported,
            f"SELECT * FROM arena_ratings WHERE aspect = '{aspect}' AND language = '{language}'",
        )
    }
    elo = _plain_elo(battles)
    bt = _mm_bradley_terry(battles)
    assert set(ratings) == set(elo)
    for model, row in ratings.items():
        assert row["elo"] == pytest.approx(elo[model], abs=1e-9)
        # the study's fit has a ridge of 1e-6 (natural scale): far below 0.01 points here
        assert row["bt_rating"] == pytest.approx(bt[model], abs=0.01)
        assert row["n_battles"] == sum(model in (b["model_a"], b["model_b"]) for b in battles)
        assert row["elo_ci_low"] <= row["elo_median"] <= row["elo_ci_high"]
        assert row["bt_ci_low"] < row["bt_rating"] < row["bt_ci_high"]
        assert row["rounds"] == ROUNDS
        # a model ranks below exactly the models whose interval lies wholly above its own
        above_bt = [o for o in ratings.values() if o["bt_ci_low"] > row["bt_ci_high"]]
        above_elo = [o for o in ratings.values() if o["elo_ci_low"] > row["elo_ci_high"]]
        assert row["rank"] == 1 + len(above_bt)
        assert row["rank_elo"] == 1 + len(above_elo)
    pairs = {
        (r["model_id"], r["opponent"]): r
        for r in _rows(
            imported,
            f"SELECT * FROM arena_pairs WHERE aspect = '{aspect}' AND language = '{language}'",
        )
    }
    plain = _plain_pairs(battles)
    assert set(pairs) == set(plain)
    for key, c in plain.items():
        row = pairs[key]
        total = c["wins"] + c["losses"] + c["ties"]
        assert (row["wins"], row["losses"], row["ties"], row["ties_bothbad"], row["battles"]) == (
            c["wins"],
            c["losses"],
            c["ties"],
            c["bothbad"],
            total,
        )
        assert row["win_rate"] == pytest.approx(c["wins"] / (c["wins"] + c["losses"]))
        assert row["score"] == pytest.approx((c["wins"] + c["ties"] / 2) / total)


def test_reimport_adds_nothing(imported, votes_path, tmp_path):
    before = _state(imported)
    copy = tmp_path / "same_votes.json"  # the same records under another name
    copy.write_bytes(votes_path.read_bytes())
    for path in (votes_path, copy):
        args = ("battles", "import", str(imported), str(path), "--rounds", str(ROUNDS))
        assert _cli(*args) == 0
    assert _state(imported) == before


def test_a_grown_file_adds_only_its_new_records(tmp_path, laion_path, records):
    root = _new_study(tmp_path / "study", laion_path)
    first = tmp_path / "first.json"
    first.write_text(json.dumps(records[:100]), encoding="utf-8")
    grown = tmp_path / "grown.json"
    grown.write_text(json.dumps(records[:120]), encoding="utf-8")
    assert _cli("battles", "import", str(root), str(first), "--rounds", "20") == 0
    n_first = _rows(root, "SELECT count(*) AS n FROM arena_votes")[0]["n"]
    assert _cli("battles", "import", str(root), str(grown), "--rounds", "20") == 0
    n_grown = _rows(root, "SELECT count(*) AS n FROM arena_votes")[0]["n"]
    answered = sum(r[k] is not None for r in records[100:120] for k in ASPECT_KEYS)
    assert n_grown - n_first == answered


# -- LMSYS-style files ------------------------------------------------------------------------
def _lmsys_records(records: list[dict]) -> list[dict]:
    """The BAFIS records as LMSYS battles: one per answered vote, its aspect named, ``tstamp``
    in seconds, written in reverse so only the timestamps give the order."""
    out = []
    for r in records:
        for key, aspect in ASPECT_KEYS.items():
            if r[key] is not None:
                out.append(
                    {
                        "model_a": r["model_a"],
                        "model_b": r["model_b"],
                        "winner": WINNERS[int(r[key])],
                        "tstamp": r["createdAt"] / 1000,
                        "language": r["language"],
                        "prompt": r["prompt"],
                        "aspect": aspect,
                    }
                )
    return out[::-1]


@pytest.mark.parametrize("suffix", [".json", ".jsonl"])
def test_lmsys_file_gives_the_same_leaderboard(imported, records, tmp_path, laion_path, suffix):
    path = tmp_path / f"battles{suffix}"
    rows = _lmsys_records(records)
    if suffix == ".json":
        path.write_text(json.dumps(rows), encoding="utf-8")
    else:
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    root = _new_study(tmp_path / "study", laion_path)
    assert _cli("battles", "import", str(root), str(path), "--rounds", str(ROUNDS)) == 0
    formats = _rows(root, "SELECT DISTINCT format FROM arena_votes")
    assert formats == [{"format": "lmsys"}]
    for table in ("arena_ratings", "arena_pairs"):
        sql = f"SELECT * FROM {table} ORDER BY ALL"  # aspect, language, model_id first
        ours, theirs = _rows(root, sql), _rows(imported, sql)
        assert len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            assert a.keys() == b.keys()
            for col in a:
                if isinstance(a[col], float):
                    assert a[col] == pytest.approx(b[col], abs=1e-6), col
                else:
                    assert a[col] == b[col], col


def test_lmsys_aspect_option_and_default(tmp_path, laion_path):
    path = tmp_path / "plain.json"
    battles = [
        {"model_a": "x", "model_b": "y", "winner": w, "tstamp": 1.7e9 + i}
        for i, w in enumerate(["model_a", "model_b", "tie", "tie (bothbad)", "model_a"])
    ]
    path.write_text(json.dumps(battles), encoding="utf-8")
    root = _new_study(tmp_path / "study", laion_path)
    assert _cli("battles", "import", str(root), str(path), "--rounds", "10") == 0
    assert (
        _cli("battles", "import", str(root), str(path), "--aspect", "bias", "--rounds", "10") == 0
    )
    got = _rows(root, "SELECT aspect, count(*) AS n FROM arena_votes GROUP BY 1 ORDER BY 1")
    assert got == [{"aspect": "bias", "n": 5}, {"aspect": "overall", "n": 5}]
    langs = _rows(root, "SELECT DISTINCT language FROM arena_ratings")
    assert langs == [{"language": "all"}]  # no language given: only the all-languages rating


# -- bad input --------------------------------------------------------------------------------
GOOD = {
    "model_a": "dall-e-3",
    "model_b": "flux-1-dev",
    "language": "de",
    "prompt": "Ein Foto.",
    "bias_vote": 0.0,
    "quality_vote": None,
    "alignment_vote": 3.0,
    "createdAt": 1724067540623,
    "updatedAt": 1724067572694,
}
BAD_BAFIS = [
    ({"model_a": None}, "record 2: model_a missing"),
    ({"model_b": ""}, "record 2: model_b '' is not a non-empty text"),
    ({"model_b": 7}, "record 2: model_b 7 is not a non-empty text"),
    ({"model_b": "dall-e-3"}, "record 2: model_a and model_b are both 'dall-e-3'"),
    ({"bias_vote": 4}, "record 2: bias_vote 4 is not 0"),
    ({"quality_vote": 2.5}, "record 2: quality_vote 2.5 is not 0"),
    ({"alignment_vote": "A"}, "record 2: alignment_vote 'A' is not 0"),
    ({"bias_vote": True}, "record 2: bias_vote True is not 0"),
    ({"createdAt": None}, "record 2: createdAt missing"),
    ({"createdAt": "2024-08-19"}, "record 2: createdAt '2024-08-19' is not a number"),
    ({"createdAt": 1724067540}, "record 2: createdAt 1724067540 is not a Unix time"),
    ({"createdAt": -5}, "record 2: createdAt -5 is not a Unix time"),
    ({"updatedAt": 1724067540000}, "record 2: updatedAt is before createdAt"),
    ({"language": 3}, "record 2: language 3 is not a non-empty text"),
]
BAD_LMSYS = [
    ({"winner": "A"}, "record 2: winner 'A' is not one of"),
    ({"winner": None}, "record 2: winner None is not one of"),
    ({"tstamp": "noon"}, "record 2: tstamp 'noon' is not a number"),
    ({"tstamp": float("inf")}, "record 2: tstamp inf is not a Unix time"),
    ({"aspect": "beauty"}, "record 2: aspect 'beauty' is not one of"),
    ({"model_a": "b"}, "record 2: model_a and model_b are both 'b'"),
]


@pytest.fixture(scope="module")
def small(tmp_path_factory, laion_path) -> Path:
    """A study that already holds votes, so 'unchanged' means something."""
    base = tmp_path_factory.mktemp("small")
    root = _new_study(base / "study", laion_path)
    path = base / "ok.json"
    path.write_text(json.dumps([GOOD, {**GOOD, "createdAt": GOOD["createdAt"] + 1}]), "utf-8")
    assert _cli("battles", "import", str(root), str(path), "--rounds", "10") == 0
    return root


def _rejected(root: Path, path: Path, expected: str, capsys, *extra: str) -> None:
    before = _state(root)
    capsys.readouterr()
    assert _cli("battles", "import", str(root), str(path), "--rounds", "10", *extra) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert str(path) in err and expected in err, err
    assert _state(root) == before


@pytest.mark.parametrize(("change", "expected"), BAD_BAFIS)
def test_bad_bafis_records_are_one_line_and_nothing_stored(
    small, tmp_path, capsys, change, expected
):
    path = tmp_path / "votes.json"
    good = {**GOOD, "createdAt": GOOD["createdAt"] + 50}
    path.write_text(json.dumps([good, {**GOOD, **change}], allow_nan=True), encoding="utf-8")
    _rejected(small, path, expected, capsys)


@pytest.mark.parametrize(("change", "expected"), BAD_LMSYS)
def test_bad_lmsys_records_are_one_line_and_nothing_stored(
    small, tmp_path, capsys, change, expected
):
    path = tmp_path / "battles.json"
    good = {"model_a": "a", "model_b": "b", "winner": "tie", "tstamp": 1.7e9}
    path.write_text(json.dumps([good, {**good, **change}], allow_nan=True), encoding="utf-8")
    _rejected(small, path, expected, capsys)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[{]", "not JSON"),
        ('{"model_a": "x"}', "not a JSON list"),
        ("[]", "no battle records"),
        ('[{"model_a": "x", "model_b": "y"}]', "record 1: neither a BAFIS record"),
        (json.dumps([GOOD, [1, 2]]), "record 2: not a JSON object"),
    ],
)
def test_bad_files_are_one_line_and_nothing_stored(small, tmp_path, capsys, text, expected):
    path = tmp_path / "votes.json"
    path.write_text(text, encoding="utf-8")
    _rejected(small, path, expected, capsys)


_DEEP = "[" * 100_000 + "]" * 100_000
_BIG = "1" * 5000  # above Python's int-string limit (4,300 digits)


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("votes.json", f"[{json.dumps(GOOD)}, {_DEEP}]", "record 2: JSON nested too deeply"),
        ("votes.jsonl", f"{json.dumps(GOOD)}\n{_DEEP}\n", "record 2: JSON nested too deeply"),
        (
            "votes.json",
            json.dumps([GOOD, {**GOOD, "extra": 7}]).replace(": 7}", f": {_BIG}}}"),
            "record 2: holds an integer of more than 4,300 digits",
        ),
        (
            "votes.jsonl",
            json.dumps(GOOD)
            + "\n"
            + json.dumps({**GOOD, "createdAt": 7}).replace(": 7", f": {_BIG}"),
            "record 2: holds an integer of more than 4,300 digits",
        ),
        (
            "votes.json",
            json.dumps([GOOD, {**GOOD, "prompt": "Ein \ud800 Foto."}]),
            "record 2: 'prompt' holds a lone surrogate ('\\ud800'), not text",
        ),
        (
            "votes.jsonl",
            json.dumps(GOOD) + "\n" + json.dumps({**GOOD, "\udfff": 1}),
            "record 2: '\\udfff' holds a lone surrogate",
        ),
        (
            "votes.json",
            json.dumps([GOOD, {**GOOD, "createdAt": 10**400}]),
            "record 2: createdAt 100000000000000... (401 digits) is not a Unix time",
        ),
        (
            "battles.json",
            json.dumps([{"model_a": "a", "model_b": "b", "winner": "tie", "tstamp": -(10**399)}]),
            "record 1: tstamp -10000000000000... (400 digits) is not a Unix time",
        ),
    ],
)
def test_hostile_json_is_one_line_naming_the_record_and_nothing_stored(
    small, tmp_path, capsys, name, text, expected
):
    """Issue 33: these were tracebacks (RecursionError, the int-string ValueError, a
    UnicodeEncodeError writing the record, an OverflowError dividing the timestamp)."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    _rejected(small, path, expected, capsys)


def test_a_list_broken_between_records_names_the_record(small, tmp_path, capsys):
    path = tmp_path / "votes.json"
    path.write_text(f"[{json.dumps(GOOD)} {json.dumps(GOOD)}]", encoding="utf-8")
    _rejected(small, path, "record 1: not JSON (expected ',' or ']' after it, line 1)", capsys)
    path.write_text(f"[{json.dumps(GOOD)}] []", encoding="utf-8")
    _rejected(small, path, "not JSON (extra data after the list, line 1)", capsys)


def test_a_later_bad_file_stores_nothing_of_the_good_one(small, tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{**GOOD, "createdAt": GOOD["createdAt"] + 99}]), "utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{**GOOD, "bias_vote": 9}]), "utf-8")
    before = _state(small)
    assert _cli("battles", "import", str(small), str(good), str(bad)) == 2
    assert "bad.json: record 1: bias_vote 9" in capsys.readouterr().err
    assert _state(small) == before


@pytest.mark.parametrize("rounds", ["0", "10001"])
def test_rounds_are_bounded(small, tmp_path, capsys, rounds):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps([GOOD]), "utf-8")
    before = _state(small)
    assert _cli("battles", "import", str(small), str(path), "--rounds", rounds) == 2
    assert "rounds must be a whole number from 1 to 10000" in capsys.readouterr().err
    assert _state(small) == before


def test_sheets_and_arena_files_do_not_mix(small, tmp_path, capsys):
    (tmp_path / "v.csv").write_text("pair_id,aspect,vote\n", "utf-8")
    (tmp_path / "v.json").write_text(json.dumps([GOOD]), "utf-8")
    args = ("battles", "import", str(small), str(tmp_path / "v.csv"), str(tmp_path / "v.json"))
    assert _cli(*args) == 2
    assert "not both in one call" in capsys.readouterr().err


def test_cli_subprocess_exit_status_and_one_line(small, tmp_path):
    """The installed entry point as a user runs it: exit 2, one line on stderr."""
    path = tmp_path / "votes.json"
    path.write_text(json.dumps([{**GOOD, "model_a": None}]), "utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "corpus_audit.cli", "battles", "import", str(small), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"error: {path}: record 1: model_a missing"]


def test_report_shows_the_imported_ratings_with_figures(imported, records):
    assert _cli("report", str(imported)) == 0
    page = (imported / "report" / "report.html").read_text(encoding="utf-8")
    table = page[page.index('<table id="arena-ratings">') :]
    table = table[: table.index("</table>")]
    # 3 aspects x (all: 5 models, de: 4, en: 5)
    assert table.count("<tr><td>") == 3 * (5 + 4 + 5)
    assert "bias 454; image quality 456; prompt alignment 454." in page
    figures = imported / "report" / "figures"
    for aspect in ASPECT_KEYS.values():
        assert (figures / f"arena_ratings_{aspect}.png").is_file()
        assert (figures / f"arena_win_rate_{aspect}.png").is_file()
    assert "Imported arena votes, win rate: image quality" in page
