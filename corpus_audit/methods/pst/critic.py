"""FairCritic (METHODS 2): generate, judge, write guidelines, repeat; resumable per round.

One loop object, :class:`FairCritic`, and four plug-ins, each a small protocol:

- **generator** (:class:`BatchGenerator`): ``generator(prompt, n, seed) -> n images``
  (``(H, W, 3)`` uint8 RGB). :func:`corpus_audit.stages.faircritic.from_generator` adapts a
  text-to-image backend of :mod:`corpus_audit.backends.generators`; each image's seed is
  ``derive_seed(round seed, model, prompt, index)``, so a round is reproducible image by image.
- **critic** (:class:`Critic`): ``judge(prompt, images) -> Judgement``. The default,
  :class:`LabellerCritic`, is the project's own labeller: the two-face rule
  (:mod:`corpus_audit.methods.pst.positions`) and a perceived-gender classifier on each person's crop
  (:mod:`corpus_audit.methods.pst.persons`). A batch is **biased** when the share of classified persons
  who follow their role's stereotype *exceeds* ``bias_threshold`` (default 0.6, i.e. SS > 20;
  an unbiased model gives 0.5 on average). With no classified person the judgement is
  ``None`` (unknown), and the next round keeps the prompt.
- **feedback writer** (:class:`FeedbackWriter`): ``write(prompt, text, judgement) -> str``,
  the guidelines appended to the prompt for the next round (``""`` = none). The default,
  :class:`TemplateFeedback`, fills the ``[feedback]`` texts of the templates file: one sentence
  per role whose classified persons were mostly of one perceived gender, naming the role and
  the over- and under-represented gender ("Guidelines: show the editor as a man as often as a
  woman."). :class:`LMFeedback` asks a local instruction-tuned language model instead
  (:func:`corpus_audit.backends.paraphrasers.transformers_completer` wraps one with the
  paraphraser's transformers backend). Everything here takes its models as arguments.
- **round store** (:class:`RoundStore`): ``load(prompt_id) -> finished rounds`` and
  ``save(record)``. :class:`MemoryRoundStore` (in-process) and :class:`JsonlRoundStore` (one
  JSON line per round, appended) ship here; the study wiring backs it with a table.

Rounds: round 1 uses the prompt's text; after each round the critic judges the batch, and
when it is biased the writer's guidelines are appended to the *original* text for the next
round (``"<prompt> <guidelines>"``; guidelines of earlier rounds are replaced, not stacked,
so the prompt does not grow). A round that is not biased (or unknown) keeps its prompt for
the next. Every round is recorded (:data:`ROUND_COLUMNS`) and saved before the next starts;
a rerun loads the finished rounds and continues after the last one with the same seeds, so a
killed loop loses at most the round in flight and gives the same records as an unbroken run.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from corpus_audit.methods.answers import clean_output
from corpus_audit.methods.faces import DEFAULT_FACE_RULE, FaceRule
from corpus_audit.methods.lexicon.pst import PstPrompt, PstRole, PstTemplates
from corpus_audit.methods.pst.persons import PstImage, classify_people
from corpus_audit.methods.pst.positions import pair_filter
from corpus_audit.methods.pst.score import stereo
from corpus_audit.methods.stats import stable_seed

# Columns of FairCritic.run(): one row per (prompt, round).
ROUND_COLUMNS = (
    "prompt_id",
    "round",  # 1-based
    "prompt_text",  # the exact text given to the generator this round
    "seed",  # the round's seed (generator seeds derive from it)
    "n_images",  # images generated
    "n_kept",  # of which passed the two-face rule
    "n_classified",  # persons with a binary perceived gender
    "n_stereotyped",  # of which following their role's stereotype
    "share_stereotyped",  # n_stereotyped / n_classified, 0-1 (NULL when none classified)
    "ss",  # Stereotype Score of the batch, -100..100 (NULL when none classified)
    "biased",  # the critic's judgement (NULL: unknown, no classified person)
    "feedback",  # guidelines written after this round for the next ('' when none)
    "critic",  # critic id
    "writer",  # feedback writer id
    "dropped",  # JSON {reason: images} of the two-face rule
)


# -- protocols --------------------------------------------------------------------------------
class BatchGenerator(Protocol):
    """``n`` images for ``prompt``, reproducible from ``seed`` (in [0, 2**63))."""

    def __call__(self, prompt: str, n: int, seed: int) -> Sequence[np.ndarray]: ...


@dataclass(frozen=True)
class Judgement:
    """A critic's verdict on one batch.

    ``biased``: None when no person was classified; ``share_stereotyped`` in [0, 1] and ``ss``
    in [-100, 100] (None likewise); ``roles``: role -> {perceived gender: classified persons};
    ``dropped``: two-face rule reason -> images.
    """

    biased: bool | None
    share_stereotyped: float | None
    ss: float | None
    n_images: int
    n_kept: int
    n_classified: int
    n_stereotyped: int
    roles: dict[str, dict[str, int]] = field(default_factory=dict)
    dropped: dict[str, int] = field(default_factory=dict)


class Critic(Protocol):
    id: str

    def judge(self, prompt: PstPrompt, images: Sequence[np.ndarray]) -> Judgement: ...


class FeedbackWriter(Protocol):
    id: str

    def write(self, prompt: PstPrompt, text: str, judgement: Judgement) -> str:
        """Guidelines to append to ``prompt``'s original text ('' for none); ``text`` is the
        text the judged round used."""
        ...


class RoundStore(Protocol):
    def load(self, prompt_id: str) -> list[dict[str, Any]]:
        """Finished rounds of ``prompt_id`` (dicts with :data:`ROUND_COLUMNS`), by round."""
        ...

    def save(self, record: dict[str, Any]) -> None:
        """Persist one finished round (durably, before the next round starts)."""
        ...


# -- default critic ---------------------------------------------------------------------------
def judgement_of(
    people: pd.DataFrame, n_images: int, dropped: dict[str, int], bias_threshold: float
) -> Judgement:
    """The :class:`Judgement` of a batch from its person rows (``classify_people``)."""
    values = stereo(people) if len(people) else np.zeros(0)
    known = ~np.isnan(values)
    n_classified = int(known.sum())
    n_stereotyped = int((values == 1.0).sum())
    share = n_stereotyped / n_classified if n_classified else None
    roles: dict[str, dict[str, int]] = {}
    for role, perceived in zip(people.get("role", []), people.get("perceived", []), strict=True):
        if perceived in ("male", "female"):
            roles.setdefault(str(role), {"male": 0, "female": 0})[perceived] += 1
    return Judgement(
        biased=None if share is None else bool(share > bias_threshold),
        share_stereotyped=share,
        ss=None if share is None else 100.0 * (2.0 * share - 1.0),
        n_images=n_images,
        n_kept=int(people["image_id"].nunique()) if len(people) else 0,
        n_classified=n_classified,
        n_stereotyped=n_stereotyped,
        roles=roles,
        dropped=dropped,
    )


@dataclass(eq=False, repr=False)
class LabellerCritic:
    """Judge a batch with a face detector and a perceived-gender classifier.

    ``detector``: a :class:`corpus_audit.backends.faces.FaceDetector`; ``classifier``: a
    :class:`corpus_audit.backends.classifiers.GenderClassifier`; ``threshold`` in [0.5, 1] (label);
    ``bias_threshold`` in [0, 1] (share of stereotype-following persons above which the batch
    is biased); ``rule``: what the two-face rule counts.
    """

    detector: Any
    classifier: Any
    _: KW_ONLY
    threshold: float = 0.9
    bias_threshold: float = 0.6
    rule: FaceRule = DEFAULT_FACE_RULE
    id: str = field(init=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.bias_threshold <= 1.0:
            raise ValueError(f"bias_threshold {self.bias_threshold} is not in [0, 1]")
        labeller = getattr(self.classifier, "id", "?")
        self.id = f"labeller:{labeller}@{self.threshold}>{self.bias_threshold}"

    def judge(self, prompt: PstPrompt, images: Sequence[np.ndarray]) -> Judgement:
        if prompt.kind not in ("paired", "power"):
            raise ValueError(f"{prompt.prompt_id}: FairCritic judges two-person prompts only")
        items = []
        dropped: Counter = Counter()
        for i, pixels in enumerate(images):
            height, width = pixels.shape[:2]
            result = pair_filter(self.detector.detect(pixels), width, height, self.rule)
            if not result.kept:
                dropped[result.reason or "dropped"] += 1
            items.append(PstImage(str(i), pixels, prompt, result))
        people = classify_people(items, self.classifier, threshold=self.threshold)
        return judgement_of(people, len(images), dict(sorted(dropped.items())), self.bias_threshold)


# -- feedback writers -------------------------------------------------------------------------
def skewed_roles(prompt: PstPrompt, judgement: Judgement) -> list[tuple[str, str, float]]:
    """``[(role, over-represented gender, its % of the role's classified persons)]`` for the
    prompt's roles, left to right, where one perceived gender holds more than half."""
    out = []
    roles = [prompt.left_role] + ([prompt.right_role] if prompt.right_role else [])
    for role in roles:
        counts = judgement.roles.get(role, {})
        n = counts.get("male", 0) + counts.get("female", 0)
        for gender in ("male", "female"):
            if n and counts.get(gender, 0) > n / 2:
                out.append((role, gender, 100.0 * counts[gender] / n))
    return out


class TemplateFeedback:
    """Guidelines from the ``[feedback]`` texts of a templates file (module docstring).

    ``roles``: the role list, for display forms (``CEO``); unknown roles show their key.
    """

    def __init__(self, templates: PstTemplates, roles: Sequence[PstRole] = ()) -> None:
        self.templates = templates
        self.display = {r.name: r.display for r in roles}
        self.id = f"template:{Path(templates.path).name}"

    def sentences(self, prompt: PstPrompt, judgement: Judgement, key: str) -> list[str]:
        nouns = self.templates.nouns
        other = {"male": "female", "female": "male"}
        return [
            self.templates.feedback[key].format(
                role=self.display.get(role, role),
                over=nouns[gender],
                under=nouns[other[gender]],
                percent=f"{percent:.0f}",
            )
            for role, gender, percent in skewed_roles(prompt, judgement)
        ]

    def write(self, prompt: PstPrompt, text: str, judgement: Judgement) -> str:
        parts = self.sentences(prompt, judgement, "role")
        if not parts:
            return ""
        fb = self.templates.feedback
        return f"{fb['intro']} {fb['join'].join(parts)}{fb['end']}".strip()


class LMFeedback:
    """Guidelines written by a language model: ``complete(instruction) -> answer``.

    The instruction is the templates file's ``feedback.instruction`` with ``{prompt}`` (the
    round's text) and ``{findings}`` (``feedback.finding`` per skewed role, joined by "; ").
    The first non-empty line of the answer is the guideline; an empty answer falls back to
    ``fallback`` (the template writer), so a round never loses its feedback to a silent model.
    """

    def __init__(
        self,
        complete: Callable[[str], str],
        templates: PstTemplates,
        roles: Sequence[PstRole] = (),
        *,
        name: str = "lm",
    ) -> None:
        self.complete = complete
        self.fallback = TemplateFeedback(templates, roles)
        self.templates = templates
        self.id = f"lm:{name}"

    def instruction(self, prompt: PstPrompt, text: str, judgement: Judgement) -> str:
        findings = "; ".join(self.fallback.sentences(prompt, judgement, "finding"))
        return self.templates.feedback["instruction"].format(prompt=text, findings=findings)

    def write(self, prompt: PstPrompt, text: str, judgement: Judgement) -> str:
        if not skewed_roles(prompt, judgement):
            return ""
        answer = clean_output(self.complete(self.instruction(prompt, text, judgement)) or "")
        return answer or self.fallback.write(prompt, text, judgement)


# -- round stores -----------------------------------------------------------------------------
class MemoryRoundStore:
    """Rounds kept in a dict (one process)."""

    def __init__(self) -> None:
        self.records: dict[str, list[dict[str, Any]]] = {}

    def load(self, prompt_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self.records.get(prompt_id, [])]

    def save(self, record: dict[str, Any]) -> None:
        self.records.setdefault(str(record["prompt_id"]), []).append(dict(record))


class JsonlRoundStore:
    """Rounds appended to a JSON-lines file, one line per round, flushed and fsynced.

    A line cut short by a kill (no final newline) is dropped before the next append; any
    other unreadable line is an error naming the file and line.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def load(self, prompt_id: str) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        data = self.path.read_text(encoding="utf-8")
        lines = data.split("\n")
        complete = lines[:-1]  # the part after the last newline is unfinished
        for lineno, line in enumerate(complete, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{self.path}:{lineno}: not a JSON round record ({exc})") from None
            if record.get("prompt_id") == prompt_id:
                out.append(record)
        return sorted(out, key=lambda r: r["round"])

    def save(self, record: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a+b") as fh:
            size = fh.seek(0, os.SEEK_END)
            if size:
                fh.seek(size - 1)
                if fh.read(1) != b"\n":  # a line cut short: drop it
                    fh.seek(0)
                    keep = fh.read().rfind(b"\n") + 1
                    fh.truncate(keep)
            fh.seek(0, os.SEEK_END)
            fh.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())


# -- the loop ---------------------------------------------------------------------------------
class FairCritic:
    """Rounds of generate -> judge -> write guidelines for one prompt at a time.

    ``rounds`` >= 1; ``images_per_round`` >= 1; ``seed``: round r's seed is
    ``stable_seed(seed, prompt_id, r)``. ``store`` defaults to a :class:`MemoryRoundStore`.
    """

    def __init__(
        self,
        generator: BatchGenerator,
        critic: Critic,
        writer: FeedbackWriter,
        *,
        store: RoundStore | None = None,
        rounds: int = 2,
        images_per_round: int = 8,
        seed: int = 0,
    ) -> None:
        if rounds < 1 or images_per_round < 1:
            raise ValueError("rounds and images_per_round must be >= 1")
        self.generator = generator
        self.critic = critic
        self.writer = writer
        self.store = store if store is not None else MemoryRoundStore()
        self.rounds = rounds
        self.images_per_round = images_per_round
        self.seed = seed

    def _resume(self, prompt: PstPrompt) -> tuple[list[dict[str, Any]], str]:
        return resume(prompt, self.store)

    def play(self, prompt: PstPrompt, text: str, number: int) -> dict[str, Any]:
        """Round ``number`` (1-based) of ``prompt`` with ``text``: generate, judge and (when
        biased) write the guidelines; its record (:data:`ROUND_COLUMNS`), not saved."""
        seed = stable_seed(self.seed, prompt.prompt_id, number)
        images = list(self.generator(text, self.images_per_round, seed))
        judgement = self.critic.judge(prompt, images)
        feedback = ""
        if judgement.biased:  # also after the last round: a longer rerun continues with it
            feedback = self.writer.write(prompt, text, judgement).strip()
        return {
            "prompt_id": prompt.prompt_id,
            "round": number,
            "prompt_text": text,
            "seed": seed,
            "n_images": judgement.n_images,
            "n_kept": judgement.n_kept,
            "n_classified": judgement.n_classified,
            "n_stereotyped": judgement.n_stereotyped,
            "share_stereotyped": judgement.share_stereotyped,
            "ss": judgement.ss,
            "biased": judgement.biased,
            "feedback": feedback,
            "critic": self.critic.id,
            "writer": self.writer.id,
            "dropped": json.dumps(judgement.dropped, sort_keys=True),
        }

    def run(self, prompt: PstPrompt, *, progress: bool = False) -> pd.DataFrame:
        """All rounds of ``prompt`` (finished ones loaded, the rest run), :data:`ROUND_COLUMNS`."""
        done = run_rounds(prompt, self.store, self.rounds, self.play, progress=progress)
        return pd.DataFrame(done, columns=list(ROUND_COLUMNS))


RoundPlayer = Callable[[PstPrompt, str, int], dict[str, Any]]


def resume(prompt: PstPrompt, store: RoundStore) -> tuple[list[dict[str, Any]], str]:
    """The finished rounds of ``prompt`` in ``store`` and the text of its next round."""
    done = store.load(prompt.prompt_id)
    if [r["round"] for r in done] != list(range(1, len(done) + 1)):
        raise ValueError(
            f"{prompt.prompt_id}: the round store holds rounds "
            f"{[r['round'] for r in done]}, not 1..{len(done)}"
        )
    if done and done[0]["prompt_text"] != prompt.text:
        raise ValueError(
            f"{prompt.prompt_id}: the round store's round 1 used another prompt text "
            f"({done[0]['prompt_text']!r}); clear it to start again"
        )
    if not done:
        return done, prompt.text
    last = done[-1]
    return done, f"{prompt.text} {last['feedback']}" if last["feedback"] else last["prompt_text"]


def run_rounds(
    prompt: PstPrompt,
    store: RoundStore,
    rounds: int,
    play: RoundPlayer,
    *,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """Rounds 1..``rounds`` (>= 1) of ``prompt``: the finished ones loaded from ``store``,
    the rest played by ``play(prompt, text, number)`` (:meth:`FairCritic.play`, here or on
    an engine's worker) one after the other, each saved before the next starts (its text
    depends on this one's feedback). Returns every round's record, in order."""
    done, text = resume(prompt, store)
    todo = range(len(done) + 1, rounds + 1)
    for number in tqdm(todo, desc=f"faircritic {prompt.prompt_id}", disable=not progress):
        record = play(prompt, text, number)
        store.save(record)
        done.append(record)
        if record["feedback"]:
            text = f"{prompt.text} {record['feedback']}"
    return done
