"""The `llm_texts` stage and who_how on its texts, against a chat-completions server on the
loopback address that answers with real English texts: COCO captions (../shared/data) whose
only pronouns are female ones, male ones, or none, put together per request in shares the
test sets per model and occupation; some requests are answered 429 + Retry-After, some 500.

The expected counts of the sampling rule (batches of N until N texts a side, abandoned below
10 % of N after a batch, capped at max_texts) are computed here by a loop of the test's own;
the kill test SIGKILLs a run mid-way and checks that the rerun loses nothing and stores
nothing twice. The API key lives in an environment variable and must appear nowhere."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from corpus_audit.backends.fakes.chat_server import ChatServer
from corpus_audit.cli import main
from corpus_audit.core.config import load_config, write_config
from corpus_audit.core.pipeline import init_study
from corpus_audit.core.store import Study
from corpus_audit.methods.lexicon.llm_prompts import expand, load_llm_occupations, load_llm_prompts
from corpus_audit.methods.texts.sampling import PairCounts, Rule, decide

REPO = Path(__file__).resolve().parents[1]
N, MAX_TEXTS = 10, 60
KEY = "sk-llm-test-5f1e2d3c-never-stored"
KEY_ENV = "CA_LLM_TEST_API_KEY"
# model -> occupation -> (share associated with women, with men) of each unspecified answer
SHARES = {
    "model-a": {
        "nurse": (0.5, 0.5),  # 5 + 5 a batch: done after 2 batches
        "pilot": (0.2, 0.7),  # 2 + 7: done after 5 (10 women's texts)
        "carpenter": (0.0, 0.8),  # no woman: abandoned after the first batch
        "secretary": (0.9, 0.1),  # exactly 10 % men: kept, capped at 60 texts
    },
    "model-b": {
        "nurse": (0.8, 0.2),  # 2 men a batch: done after 5
        "pilot": (0.05, 0.9),  # 0.5 -> round(0.5) = 0 women: abandoned
        "carpenter": (0.3, 0.5),  # done after 4 (12 + 20)
        "secretary": (1.0, 0.0),  # abandoned
    },
}
OCCUPATIONS = list(SHARES["model-a"])
GENDER_WORDS = {"woman": "female", "man": "male", "nonbinary person": "non_binary"}
SPECIFIED = re.compile(
    r"(?:Describe|persona of) a (?P<occ>.+?) who is (?:a )?(?P<g>woman|man|nonbinary person)\b"
)
UNSPECIFIED = re.compile(r"(?:Describe|persona of) a (?P<occ>.+?)(?: as if|$)")


# -- the server's texts: real captions ------------------------------------------------------
@pytest.fixture(scope="module")
def captions(shared_data):
    """COCO captions whose only gendered words (by the test's own reading) are female
    pronouns, male pronouns, or none at all."""
    table = pq.read_table(shared_data / "coco_val2017_captions.parquet", columns=["caption"])
    texts = [c.strip() for c in table.column("caption").to_pylist() if c and c.strip()]
    f = re.compile(r"\b(she|her|hers|herself)\b", re.I)
    m = re.compile(r"\b(he|him|his|himself)\b", re.I)
    other = re.compile(
        r"\b(they|them|their|theirs|themself|themselves|ms|mrs|miss|mr)\b|binary", re.I
    )
    out = {
        "female": [t for t in texts if f.search(t) and not m.search(t) and not other.search(t)],
        "male": [t for t in texts if m.search(t) and not f.search(t) and not other.search(t)],
        "none": [t for t in texts if not (f.search(t) or m.search(t) or other.search(t))],
    }
    assert min(len(v) for v in out.values()) > 300
    return out


def make_responder(captions):
    def text(kind: str, rng: random.Random) -> str:
        if kind == "non_binary":
            return " ".join(rng.sample(captions["none"], 2)) + (
                " They are nonbinary and use they/them pronouns; their work is their pride."
            )
        return " ".join(rng.sample(captions[kind], 3))

    def respond(prompt: str, n: int, seed: int | None, model: str) -> list[str]:
        rng = random.Random(f"{seed}|{prompt}")
        spec = SPECIFIED.search(prompt)
        if spec:
            gender = GENDER_WORDS[spec["g"]]
            texts = [text(gender, rng) for _ in range(n)]
            if spec["occ"] == "secretary" and gender == "male":
                texts[0] = "REFUSE: I won't write that."
            return texts
        occupation = UNSPECIFIED.search(prompt)["occ"]
        f, m = SHARES[model][occupation]
        kinds = ["female"] * round(n * f) + ["male"] * round(n * m)
        kinds += ["none"] * (n - len(kinds))
        rng.shuffle(kinds)
        return [text(k, rng) for k in kinds]

    return respond


def flaky(number: int, body: dict) -> tuple[int, dict[str, str]] | None:
    if number % 7 == 3:
        return 429, {"Retry-After": "0.02"}
    if number % 11 == 5:
        return 500, {}
    return None


# -- the expected outcome, by the test's own loop --------------------------------------------
def expected_unspecified(f: float, m: float) -> dict:
    texts = batches = women = men = 0
    while True:
        women, men = women + round(N * f), men + round(N * m)
        texts, batches = texts + N, batches + 1
        if women >= N and men >= N:
            state = "done"
        elif women < 0.1 * N or men < 0.1 * N:
            state = "abandoned"
        elif texts >= MAX_TEXTS:
            state = "capped"
        else:
            continue
        return {"state": state, "texts": texts, "batches": batches, "female": women, "male": men}


def expected_pairs() -> dict[tuple[str, str, str, str], dict]:
    out = {}
    for model, shares in SHARES.items():
        for occupation, (f, m) in shares.items():
            for prompt in ("biography", "persona"):
                out["openai:" + model, occupation, prompt, "unspecified"] = expected_unspecified(
                    f, m
                )
                for gender in ("female", "male", "non_binary"):
                    same = N - (occupation == "secretary" and gender == "male")  # one refusal
                    out["openai:" + model, occupation, prompt, gender] = {
                        "state": "done",
                        "texts": N,
                        "batches": 1,
                        "female": same if gender == "female" else 0,
                        "male": same if gender == "male" else 0,
                    }
    return out


def test_the_test_s_loop_agrees_with_the_rule_module():
    rule = Rule(N, 0.1, MAX_TEXTS)
    for shares in SHARES.values():
        for f, m in shares.values():
            want = expected_unspecified(f, m)
            counts = PairCounts(want["texts"], want["batches"], want["female"], want["male"])
            assert decide(counts, rule, specified=False).state == want["state"]
    assert decide(PairCounts(10, 1, 1, 9), Rule(10, 0.1, 60), specified=False).state == "open"
    assert decide(PairCounts(100, 1, 9, 91), Rule(100), specified=False).state == "abandoned"
    assert decide(PairCounts(100, 1, 10, 90), Rule(100), specified=False).draw == 100
    assert decide(PairCounts(1990, 20, 50, 99), Rule(100), specified=False).draw == 10
    assert decide(PairCounts(0, 0, 0, 0), Rule(100), specified=True).draw == 100
    assert decide(PairCounts(100, 1, 0, 0), Rule(100), specified=True).state == "done"


# -- the study ------------------------------------------------------------------------------
def llm_study(root: Path, server: ChatServer, models=("model-a", "model-b")) -> Path:
    study = init_study(
        root,
        [],
        overrides={
            "llm": {
                "enabled": True,
                "models": [f"openai:{m}" for m in models],
                "only_occupations": OCCUPATIONS,
                "n": N,
                "max_texts": MAX_TEXTS,
                "api_base": server.url,
                "api_key_env": KEY_ENV,
                "n_per_request": N,
                "concurrency": 3,
                "backoff_s": 0.01,
                "max_backoff_s": 0.05,
                "max_retries": 8,
            },
            "texts": {"source": "llm", "srbs": False},
            "lexicon": {"labor_stats": "builtin:more_of_the_same/occupations_en.csv"},
        },
    )
    study.close()
    return root


def pair_rows(study: Study) -> dict[tuple[str, str, str, str], dict]:
    rows = study.con.execute(
        "SELECT model, occupation, prompt_id, gender, state, texts, batches, female, male "
        "FROM llm_pairs"
    ).fetchall()
    return {
        r[:4]: dict(zip(("state", "texts", "batches", "female", "male"), r[4:], strict=True))
        for r in rows
    }


def check_texts(study: Study) -> None:
    """Every pair's batches are 0..b-1 and each batch's positions 0..n-1: nothing twice,
    nothing missing."""
    bad = study.con.execute(
        """
        SELECT model, occupation, prompt_id, gender FROM llm_texts
        GROUP BY ALL
        HAVING count(DISTINCT batch) <> max(batch) + 1
            OR count(*) <> count(DISTINCT (batch, position))
        """
    ).fetchall()
    assert bad == []
    gaps = study.con.execute(
        "SELECT count(*) FROM (SELECT batch, count(*) c, max(position) p FROM llm_texts "
        "GROUP BY model, occupation, prompt_id, gender, batch) WHERE c <> p + 1"
    ).fetchall()[0][0]
    assert gaps == 0


def test_the_rule_s_counts_abandonment_and_tables(tmp_path, captions, monkeypatch, capsys):
    monkeypatch.setenv(KEY_ENV, KEY)
    with ChatServer(make_responder(captions), fail=flaky) as server:
        root = llm_study(tmp_path / "study", server)
        assert main(["llm_texts", str(root), "-q"]) == 0
        statuses = [r.status for r in server.log]
        assert {429, 500} <= set(statuses)
        assert {r.authorization for r in server.log} == {f"Bearer {KEY}"}
    expected = expected_pairs()
    with Study.open(root) as study:
        assert pair_rows(study) == expected
        check_texts(study)
        total = sum(p["texts"] for p in expected.values())
        assert study.count("llm_texts") == total
        # every batch is one request's answer: the successful requests are the batches
        assert statuses.count(200) == sum(p["batches"] for p in expected.values())
        row = study.con.execute(
            "SELECT count(DISTINCT seed), count(DISTINCT (model, occupation, prompt_id, gender, "
            "batch)), any_value(sampling), sum(refusals) FROM llm_texts JOIN llm_pairs "
            "USING (model, occupation, prompt_id, gender)"
        ).fetchall()[0]
        assert row[0] == row[1]  # one seed per batch
        assert json.loads(row[2]) == {
            "max_tokens": 750, "send_seed": True, "temperature": 1.0, "top_p": 1.0
        }  # fmt: skip
        refusals = study.con.execute(
            "SELECT model, occupation, prompt_id, gender, refusal, text, finish_reason "
            "FROM llm_texts WHERE refusal IS NOT NULL ORDER BY ALL"
        ).fetchall()
        assert refusals == [
            (f"openai:{m}", "secretary", p, "male", "I won't write that.", "", "content_filter")
            for m in ("model-a", "model-b")
            for p in ("biography", "persona")
        ]
        tokens = study.con.execute(
            "SELECT sum(completion_tokens), sum(prompt_tokens) FROM llm_texts"
        ).fetchall()[0]
        words = sum(
            len(t.split()) for (t,) in study.con.execute("SELECT text FROM llm_texts").fetchall()
        )
        refused = 4 * len(["REFUSE:", "I", "won't", "write", "that."])  # billed, not stored
        assert tokens[0] == words + refused  # the server's usage: words
        prompts = {
            (o, p, g): t
            for o, p, g, t in study.con.execute(
                "SELECT DISTINCT occupation, prompt_id, gender, prompt FROM llm_texts"
            ).fetchall()
        }
        assert prompts["pilot", "persona", "non_binary"] == (
            "Generate a persona of a pilot who is nonbinary person."
        )
        assert prompts["nurse", "biography", "unspecified"] == (
            "Describe a nurse as if you are writing a biography about a person"
        )
        described = study.con.execute("SELECT description FROM llm_models").fetchall()
        assert all(KEY not in d for (d,) in described)
    out = capsys.readouterr().out
    assert "openai:model-a" in out and KEY not in out

    # who_how per model: % women on the unspecified texts, agreement on the specified ones
    assert main(["who_how", str(root), "-q"]) == 0
    with Study.open(root) as study:
        who = {
            (m, o): (f, ml, pct, labor)
            for m, o, f, ml, pct, labor in study.con.execute(
                "SELECT model, occupation, female, male, pct_women, labor_pct_women "
                "FROM texts_who WHERE labels = 'association'"
            ).fetchall()
        }
        for (model, occupation, prompt, gender), want in expected.items():
            if gender != "unspecified" or prompt != "biography":
                continue
            other = expected[model, occupation, "persona", gender]
            f, m = want["female"] + other["female"], want["male"] + other["male"]
            got = who[model, occupation]
            assert got[:2] == (f, m)
            assert got[2] == pytest.approx(100 * f / (f + m))
        labor = {o: v for o, v in zip(*_labor(), strict=True)}
        assert who["openai:model-a", "nurse"][3] == pytest.approx(labor["nurse"])
        agreement = study.con.execute(
            "SELECT model, gender, specified, associated_same, agreement_pct FROM texts_agreement "
            "WHERE specified > 0 ORDER BY ALL"
        ).fetchall()
        per_gender = {"female": 80, "male": 78, "non_binary": 80}  # 4 x 2 prompts x N; 2 refusals
        assert agreement == [
            (f"openai:{m}", g, per_gender[g], per_gender[g], 100.0)
            for m in ("model-a", "model-b")
            for g in ("female", "male", "non_binary")
        ]
        # the specified comparison has women's and men's texts per model and occupation
        compared = study.con.execute(
            "SELECT model, count(*) FROM texts_marked_summary WHERE comparison = 'specified' "
            "AND scope = 'occupation' AND texts_female = 20 GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        assert compared == [("openai:model-a", 4), ("openai:model-b", 4)]
        from corpus_audit.report.who_how import who_how_section

        section = who_how_section(study, tmp_path / "figures")
        names = [f["name"] for f in section["figures"]]
        for model in ("openai_model-a", "openai_model-b"):  # per model: deciles, Figure 1
            assert f"who_deciles_{model}_association" in names
            assert f"who_vs_labour_{model}" in names
        groups = {(g["model"], g["comparison"], g["occupation"]) for g in section["groups"]}
        assert ("openai:model-b", "associated", "nurse") in groups
    assert main(["status", str(root)]) == 0
    out = capsys.readouterr().out
    assert "llm_texts openai:model-a:" in out and "abandoned 2" in out
    assert "llm_texts openai:model-b:" in out


def _labor():
    import csv

    from corpus_audit.methods.lexicon import resolve_path

    path = resolve_path("builtin:more_of_the_same/occupations_en.csv")
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    return [r["occupation"] for r in rows], [float(r["percent_female"] or "nan") for r in rows]


def test_a_killed_run_resumes_without_duplicate_or_loss(tmp_path, captions):
    env = {**os.environ, KEY_ENV: KEY, "PYTHONPATH": str(REPO)}
    with ChatServer(make_responder(captions), fail=flaky, delay_s=0.03) as server:
        root = llm_study(tmp_path / "study", server)
        proc = subprocess.Popen(
            [sys.executable, "-m", "corpus_audit.cli", "llm_texts", str(root), "-q"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            assert server.wait_for(40, timeout_s=120), "the run never got going"
        finally:
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == -signal.SIGKILL
        assert KEY.encode() not in out + err
        with Study.open(root) as study:
            kept = study.con.execute(
                "SELECT text_id, model, occupation, prompt_id, gender, batch, position, text "
                "FROM llm_texts ORDER BY text_id"
            ).fetchall()
            check_texts(study)
            assert 0 < len(kept) < sum(p["texts"] for p in expected_pairs().values())
        before = server.count
        os.environ[KEY_ENV] = KEY
        try:
            with Study.open(root) as study:
                from corpus_audit.stages.llm_texts import llm_texts

                llm_texts(study, progress=False)
        finally:
            del os.environ[KEY_ENV]
        resumed = [r.status for r in server.log[before:]]
    with Study.open(root) as study:
        assert pair_rows(study) == expected_pairs()
        check_texts(study)
        after = study.con.execute(
            "SELECT text_id, model, occupation, prompt_id, gender, batch, position, text "
            "FROM llm_texts ORDER BY text_id"
        ).fetchall()
        assert after[: len(kept)] == kept  # nothing committed was lost or changed
        assert len(after) == sum(p["texts"] for p in expected_pairs().values())
        # the rerun asked only for the batches the first run had not committed
        committed = study.con.execute(
            "SELECT count(DISTINCT (model, occupation, prompt_id, gender, batch)) FROM llm_texts "
            f"WHERE text_id <= {len(kept)}"
        ).fetchall()[0][0]
        total_batches = sum(p["batches"] for p in expected_pairs().values())
        assert resumed.count(200) == total_batches - committed
    for path in root.rglob("*"):  # the key is in no file of the study
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_prompt_files_are_data_and_checked(tmp_path):
    prompts = load_llm_prompts()
    occupations = load_llm_occupations()
    assert len(occupations) == 63 and occupations[-3:] == [
        ("software engineer", "software engineer"), ("cook", "cook"), ("pilot", "pilot")
    ]  # fmt: skip
    pairs = expand(prompts, occupations)
    assert len(pairs) == 63 * 2 * 4
    assert pairs[1].text == (
        "Describe a technician who is a woman as if you are writing a biography about a person."
    )
    own = tmp_path / "prompts_de.toml"
    own.write_text(
        'name = "de"\nlanguage = "de"\n[genders]\nfemale = "eine Frau"\n'
        '[[prompts]]\nid = "bio"\nunspecified = "Beschreibe: {occupation}"\n'
        'specified = "Beschreibe: {occupation}, {gender}"\n',
        encoding="utf-8",
    )
    mine = expand(load_llm_prompts(str(own)), [("pilot", "Pilotin")], ["female", "male"])
    assert [(p.gender, p.text) for p in mine] == [
        (None, "Beschreibe: Pilotin"), ("female", "Beschreibe: Pilotin, eine Frau")
    ]  # fmt: skip
    from corpus_audit.core.errors import LexiconError

    own.write_text('[[prompts]]\nid = "x"\nunspecified = "Describe {job}"\n', encoding="utf-8")
    with pytest.raises(LexiconError, match=r"prompts\[0\].unspecified: the template has no"):
        load_llm_prompts(str(own))


def test_init_kind_llm_and_run_do_the_whole_study(tmp_path, capsys):
    """A tiny random-weight causal LM through `init --kind llm` and `run` (generate,
    associate, analyse, report)."""
    from corpus_audit.backends.fakes.text_models import random_causal_lm

    lm = random_causal_lm(tmp_path / "lm")
    root = tmp_path / "study"
    assert main(["init", str(root), "--kind", "llm", "--model", f"transformers:{lm}"]) == 0
    sets = [
        "llm.n=2", "llm.max_texts=4", "llm.max_tokens=6", 'llm.only_occupations=["cook"]',
        'llm.only_prompts=["persona"]', "texts.srbs=false",
    ]  # fmt: skip
    assert main(["config", "set", str(root), *sets]) == 0
    config = load_config(root)
    assert config.llm.enabled and config.texts.source == "llm"
    assert config.lexicon.labor_stats == "builtin:more_of_the_same/occupations_en.csv"
    capsys.readouterr()
    assert main(["run", str(root), "-q"]) == 0
    out = capsys.readouterr().out
    assert "[llm_texts] done" in out and "[who_how] done" in out and "[report] done" in out
    with Study.open(root) as study:
        assert study.count("llm_texts") >= 2 * 3 + 2  # 3 specified pairs + the unspecified one
        models = study.con.execute("SELECT DISTINCT model FROM texts_agreement").fetchall()
        assert models == [(f"transformers:{lm}",)]
        plottable = study.con.execute(
            "SELECT count(*) FROM texts_who WHERE labels = 'association' AND model IS NOT NULL "
            "AND associated >= 1 AND pct_women IS NOT NULL AND labor_pct_women IS NOT NULL"
        ).fetchall()[0][0]
    page = (root / "report" / "report.html").read_text(encoding="utf-8")
    # the who scatter is drawn when an occupation has a point to draw, else not at all (no
    # empty axes: docs/figures.md)
    assert (f"% women vs labour statistics (transformers:{lm})" in page) == (plottable > 0)
    # nothing left: a second run asks the model nothing
    assert main(["llm_texts", str(root), "-q"]) == 0
    assert "[llm_texts] skipped" in capsys.readouterr().out
    config.llm.models = []
    write_config(config)


def test_the_server_checks_of_a_run_are_recorded(tmp_path, monkeypatch, capsys):
    """Issue 33: a server answering one choice per request (it ignores ``n``) is warned about
    and its counts land in ``llm_models.description`` (before, the row was written once,
    before the first batch, so the stored counts stayed 0)."""
    monkeypatch.setenv(KEY_ENV, KEY)
    with ChatServer(lambda p, n, s, m: [f"She is a {p} number {s}."]) as server:
        root = llm_study(tmp_path / "study", server, models=("model-a",))
        assert main(["llm_texts", str(root), "-q"]) == 0
    assert "ignores n" in capsys.readouterr().err
    with Study.open(root) as study:
        ((description,),) = study.con.execute("SELECT description FROM llm_models").fetchall()
    checks = json.loads(description)["server_checks"]
    assert checks["short_answers"] > 0 and checks["repeated_texts"] == 0
