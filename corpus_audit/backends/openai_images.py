"""Generator backend ``openai:<model>``: an OpenAI-compatible images endpoint (DALL-E 3 and the like).

A ``generate.models`` entry ``"openai:dall-e-3"`` sends each prompt of the study to
``<generate.api_base>/images/generations`` (``{"model", "prompt", "n": 1, "size", "quality",
"style", "response_format": "b64_json"}``; quality and style only when set), with the key read
from the environment variable ``generate.api_key_env`` (:mod:`corpus_audit.backends.api_client`:
retries, backoff, timeout, concurrency).

In the ``generate`` stage the API is a model worker of the run's engine (:class:`ImagesSession`:
its load opens the client session, a unit is ``generate.api_concurrency`` prompts asked for
at once) and every image is committed as its unit comes back (:func:`commit_answers`):
its file (the bytes the API sent, unchanged) and then its ``images``, ``generated_images`` and
``api_images`` rows in one transaction, so a killed run loses only the requests in flight and a
rerun asks only for what has no row. Images are keyed by model, prompt and index as every
generated image (the ``image_id`` carries the derived number that is the seed of a diffusers
image; here nothing is seeded and ``images.seed`` is NULL). ``api_images`` keeps per image
the prompt sent, the **revised prompt** the API returns (DALL-E 3 rewrites prompts), size,
quality, style, the usage the API reports and the cost from ``generate.api_prices``.

A content-policy refusal (an HTTP 400 whose code is ``content_policy_violation`` or
``moderation_blocked``) is recorded in ``api_images`` (``status = 'refused'``, the API's
message) and counted as a drop reason, and the run goes on; a rerun does not ask again. Any
other final answer (401 bad key, 404 unknown model, another 400) or retries running out stops
the run with one line: nothing more is asked for, the answers in flight are still kept.

An answer's image is checked on its header before any pixel is decoded: at most 4 x the pixels
of ``generate.api_size`` and, in the ``generate`` stage, at most ``images.max_pixels`` (the bound
of every image the study decodes); a larger one stops the run with one line, nothing of it
stored.

These APIs take no seed: an image cannot be regenerated, and the report and ``status`` say so.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from corpus_audit.backends.api_client import ApiClient, ApiRefusal, utcnow
from corpus_audit.backends.engines.base import cancel_worker
from corpus_audit.backends.generators import (
    GENERATORS,
    GeneratedImage,
    GenerationSettings,
    GeneratorTraits,
)
from corpus_audit.core.config import GenerateSection, derived_from
from corpus_audit.core.errors import ApiError
from corpus_audit.core.fileio import atomic_path
from corpus_audit.core.imagefile import DEFAULT_MAX_PIXELS, UnreadableImage, image_size
from corpus_audit.core.store import StageRun, Study

NOT_REPRODUCIBLE = (
    "cannot be regenerated: the API takes no seed, and the provider may change the model "
    "behind the name"
)
REFUSED_CODES = ("content_policy_violation", "moderation_blocked")


def is_content_refusal(exc: ApiRefusal) -> bool:
    """A refusal of this prompt's content (recorded per image, the run goes on), as opposed to
    a bad key, model or setting (401, 403, 404, other 400s: the run stops)."""
    return exc.status == 400 and exc.code in REFUSED_CODES


@derived_from(
    GenerateSection,
    "base_url=api_base",
    "key_env=api_key_env",
    "size=api_size",
    "quality=api_quality",
    "style=api_style",
    "concurrency=api_concurrency",
    "timeout=api_timeout",
    "max_retries=api_max_retries",
    "backoff=api_backoff",
    "max_backoff=api_max_backoff",
    "max_body_mb=api_max_body_mb",
)
class ApiImageOptions:
    """The ``generate.api_*`` settings a request uses (recorded with every image), derived
    from their declarations in :mod:`corpus_audit.core.config`;
    ``ApiImageOptions.from_config(section)`` reads them from a ``[generate]`` section."""


@dataclass
class ApiImage:
    """One answer: the image's bytes (as sent), its pixels, the revised prompt and the usage."""

    data: bytes
    pixels: np.ndarray
    revised_prompt: str | None
    usage: dict[str, Any] | None
    attempts: int
    seconds: float


def _size(size: str) -> dict[str, int]:
    """``"1024x1792"`` -> width and height (0 when the provider's size is not WxH)."""
    w, _, h = size.partition("x")
    return {"width": int(w) if w.isdigit() else 0, "height": int(h) if h.isdigit() else 0}


def price(prices: dict[str, float], model: str, size: str, quality: str) -> float | None:
    """USD per image from ``generate.api_prices``: the most specific key of
    ``model:size:quality``, ``model:size``, ``model``; None when none is listed."""
    for key in (f"{model}:{size}:{quality or 'standard'}", f"{model}:{size}", model):
        if key in prices:
            return float(prices[key])
    return None


class OpenAIImagesGenerator:
    """The :class:`~corpus_audit.backends.generators.Generator` of an OpenAI-compatible images API."""

    backend = "openai"
    max_prompt_tokens = None

    def __init__(
        self,
        model_id: str,
        settings: GenerationSettings,
        *,
        config: Any = None,
        options: ApiImageOptions | None = None,
    ) -> None:
        self.model_id = model_id
        self.settings = settings
        self.options = options or (
            ApiImageOptions.from_config(config) if config is not None else ApiImageOptions()
        )
        self.prices = dict(getattr(config, "api_prices", {}) or {})
        self.client = ApiClient.from_settings(self.options)

    def payload(self, prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_id,
            "prompt": prompt,
            "n": 1,
            "size": self.options.size,
            "response_format": "b64_json",
        }
        if self.options.quality:
            body["quality"] = self.options.quality
        if self.options.style:
            body["style"] = self.options.style
        return body

    def request(self, prompt: str, *, max_pixels: int | None = None) -> ApiImage:
        """One image for ``prompt`` (raises :class:`ApiRefusal` for a refusal). ``max_pixels``
        (>= 1; the study's ``images.max_pixels``) bounds the answer's width x height on top
        of :meth:`max_pixels`; both are checked on the header, before any pixel is decoded."""
        from PIL import Image

        answer = self.client.post_json("images/generations", self.payload(prompt))
        if not isinstance(answer.body, dict):
            raise ApiError(f"{self.client.base_url}: an images answer that is not a JSON object")
        items = answer.body.get("data") or []
        if not items or not isinstance(items[0], dict) or not items[0].get("b64_json"):
            raise ApiError(f"{self.client.base_url}: an images answer without data[0].b64_json")
        limit = self.max_pixels()
        bound = f"for size {self.options.size!r}"
        if max_pixels is not None and max_pixels < limit:
            limit, bound = int(max_pixels), "images.max_pixels"
        try:
            if not isinstance(items[0]["b64_json"], str):
                raise ValueError("b64_json is not text")
            data = base64.b64decode(items[0]["b64_json"], validate=True)
            image_size(data, max_pixels=limit)  # the header, before any pixel is decoded
            with Image.open(io.BytesIO(data)) as im:
                pixels = np.ascontiguousarray(np.asarray(im.convert("RGB")))
        except UnreadableImage as exc:
            raise ApiError(
                f"{self.client.base_url}: the answer's image is refused: {exc.detail} "
                f"(at most {limit:,} pixels, {bound})"
            ) from None
        except (ValueError, OSError, Image.DecompressionBombError) as exc:  # binascii.Error too
            raise ApiError(
                f"{self.client.base_url}: the answer's image cannot be decoded: {exc}"
            ) from None
        usage = answer.body.get("usage")
        return ApiImage(
            data, pixels, items[0].get("revised_prompt"), usage if isinstance(usage, dict) else None,
            answer.attempts, answer.seconds,
        )  # fmt: skip

    def max_pixels(self) -> int:
        """The most pixels an answer may have: 4 x the requested ``api_size`` (providers may
        return a larger image than asked, not a 9000 x 9000 one), and never more than Pillow's
        decompression-bomb guard; the guard alone when the size is not ``WxH``."""
        asked = _size(self.options.size)
        pixels = asked["width"] * asked["height"]
        return min(DEFAULT_MAX_PIXELS, 4 * pixels) if pixels else DEFAULT_MAX_PIXELS

    def cost(self) -> float | None:
        o = self.options
        return price(self.prices, self.model_id, o.size, o.quality)

    # -- the Generator protocol (FairCritic calls generate) ---------------------------------
    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return [0] * len(texts)

    def generate(self, prompts: Sequence[str], seeds: Sequence[int]) -> list[GeneratedImage]:
        """One image per prompt, ``concurrency`` requests at a time; seeds are ignored (the API
        has none). A refused prompt gives a black image flagged ``nsfw`` (no face: the critic
        counts it as dropped)."""
        if len(prompts) != len(seeds):
            raise ValueError("generate: prompts and seeds differ in length")
        out: dict[int, GeneratedImage] = {}
        for i, future in self.client.map(lambda i: self.request(prompts[i]), range(len(prompts))):
            try:
                image = future.result()
                out[i] = GeneratedImage(image.pixels, None)
            except ApiRefusal as exc:
                if not is_content_refusal(exc):
                    raise ApiError(f"{self.client.base_url}: {exc}") from None
                out[i] = GeneratedImage(np.zeros((64, 64, 3), np.uint8), True)
        return [out[i] for i in range(len(prompts))]

    def describe(self) -> dict[str, Any]:
        o = self.options
        return {
            "backend": self.backend,
            "model_id": self.model_id,
            "api": self.client.describe(),
            "size": o.size,
            "quality": o.quality or None,
            "style": o.style or None,
            "price_usd_per_image": self.cost(),
            "seed": None,
            "reproducible": False,
            "note": NOT_REPRODUCIBLE,
            "device": "api",
            "dtype": "",
            "settings": {**asdict(self.settings), **_size(o.size)},
        }

    def cancel(self) -> None:
        """End the requests in flight and the backoff waits now (Ctrl-C or SIGTERM on the
        driver while this client serves on an engine's worker thread)."""
        self.client.cancel()

    def close(self) -> None:
        return None


# -- the generate stage's path for per-image API backends --------------------------------------
def not_refused(study: Study, run: StageRun, model: str, missing: Sequence[Any]) -> list:
    """The ``missing`` jobs the API did not refuse in an earlier run (those are not asked for
    again: one message says how many)."""
    refused = set(
        study.column(
            "SELECT image_id FROM api_images WHERE model_id = ? AND status = 'refused'", [model]
        )
    )
    todo = [j for j in missing if j.image_id not in refused]
    if len(todo) < len(missing):
        run.messages.append(
            f"{model}: {len(missing) - len(todo)} image(s) refused by the API in an earlier run "
            "are not asked for again (api_images.status = 'refused')"
        )
    return todo


@dataclass(frozen=True)
class Answer:
    """The API's answer to one prompt of a unit (``index`` in the unit): an ``image``, a
    content ``refusal`` (its code and message: recorded, the run goes on) or the final
    ``error`` that stops the run (a bad key, model or setting; retries run out)."""

    index: int
    image: ApiImage | None = None
    refusal: tuple[str, str] | None = None
    error: str | None = None


class ImagesSession:
    """An images API as a model worker of the ``generate`` stage: loading it opens the client
    session (its key, its pool of ``generate.api_concurrency`` connections), ``close()``
    closes it. A unit is a tuple of prompts (``api_concurrency`` of them), asked for
    ``concurrency`` at a time; it returns the generator's ``describe()`` and one
    :class:`Answer` per prompt asked, in the order they arrived. After a final error the
    session asks for nothing more (the answers in flight are still returned): a later unit
    gets no answer, as a client that stopped would."""

    def __init__(
        self,
        backend: str,
        model_id: str,
        settings: GenerationSettings,
        config: Any,
        max_pixels: int,
    ) -> None:
        # the factory the registry names for ``backend`` (``openai``: OpenAIImagesGenerator)
        self.generator = GENERATORS.get(backend)(model_id, settings, config=config)
        self.max_pixels = int(max_pixels)  # the study's images.max_pixels (>= 1)
        self.stopped = False

    def __call__(self, prompts: tuple[str, ...]) -> tuple[dict[str, Any], list[Answer]]:
        gen = self.generator
        answers: list[Answer] = []
        if self.stopped:
            return gen.describe(), answers
        requests = gen.client.map(
            lambda i: gen.request(prompts[i], max_pixels=self.max_pixels),
            range(len(prompts)),
            stop=lambda: self.stopped,
        )
        for i, future in requests:
            answers.append(self._answer(i, future))
        return gen.describe(), answers

    def _answer(self, index: int, future: Any) -> Answer:
        try:
            return Answer(index, image=future.result())
        except ApiError as exc:
            self.stopped = True
            return Answer(index, error=str(exc))
        except ApiRefusal as exc:
            if not is_content_refusal(exc):  # a bad key, model or setting: stop
                self.stopped = True
                return Answer(index, error=f"{self.generator.client.base_url}: {exc}")
            return Answer(index, refusal=(exc.code, exc.message))

    def cancel(self) -> None:
        """End the requests in flight now (the engine gave up on the unit)."""
        cancel_worker(self.generator)

    def close(self) -> None:
        self.generator.close()


def commit_answers(
    study: Study,
    run: StageRun,
    model: str,
    settings_id: str,
    jobs: Sequence[Any],
    answers: Sequence[Answer],
    details: dict[str, Any],
) -> tuple[int, str | None]:
    """Commit one unit's answers for its ``jobs`` (:class:`corpus_audit.stages.generate.Job`)
    as they arrived: each image's file (the bytes the API sent) and then its rows in one
    transaction; each content refusal recorded and counted as a drop. Returns (images made,
    the first final error or None)."""
    o = ApiImageOptions.from_config(study.config.generate)
    unit_price = details.get("price_usd_per_image")
    made, failed = 0, None
    for answer in answers:
        job = jobs[answer.index]
        if answer.error is not None:
            failed = failed or answer.error
        elif answer.refusal is not None:
            code, message = answer.refusal
            _record_refusal(study, model, job, code, message, o)
            run.drop(f"refused_by_api:{code}")
        elif answer.image is not None:
            with atomic_path(study.path(job.rel_path)) as tmp:
                tmp.write_bytes(answer.image.data)
            _record_image(study, model, settings_id, job, answer.image, o, unit_price)
            made += 1
    return made, failed


def _api_row(job: Any, model: str, o: ApiImageOptions) -> list[Any]:
    return [job.image_id, model, job.spec.key, job.index, job.spec.text, o.size, o.quality or None,
            o.style or None]  # fmt: skip


def _record_image(
    study: Study,
    model: str,
    settings_id: str,
    job: Any,
    image: ApiImage,
    o: ApiImageOptions,
    unit_price: float | None,
) -> None:
    spec = job.spec
    sha = hashlib.sha256(image.data).hexdigest()
    with study.transaction() as con:
        con.execute(
            "INSERT INTO images (image_id, source, caption_id, prompt_id, occupation, path, "
            "model_id, prompt_text, seed, nsfw, strategy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [job.image_id, "generated", spec.caption_id, spec.prompt_id, spec.occupation,
             job.rel_path, model, spec.text, None, None, spec.strategy],
        )  # fmt: skip
        con.execute(
            "INSERT INTO generated_images VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [job.image_id, settings_id, spec.key, job.index, None, False, None, None],
        )
        con.execute(
            "INSERT INTO api_images VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [*_api_row(job, model, o), "ok", image.revised_prompt,
             json.dumps(image.usage, sort_keys=True) if image.usage else None, unit_price,
             None, None, image.attempts, sha, utcnow()],
        )  # fmt: skip


def _record_refusal(
    study: Study, model: str, job: Any, code: str, message: str, o: ApiImageOptions
) -> None:
    with study.transaction() as con:
        con.execute(
            "INSERT INTO api_images VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [*_api_row(job, model, o), "refused", None, None, None, code,
             message[:2000], None, None, utcnow()],
        )  # fmt: skip


def api_summary(study: Study, model: str) -> dict[str, Any]:
    """Images done and refused and their cost for one API model (status, the stage summary)."""
    row = study.con.execute(
        "SELECT count(*) FILTER (WHERE status = 'ok'), count(*) FILTER (WHERE status = 'refused'), "
        "sum(cost_usd) FILTER (WHERE status = 'ok'), count(*) FILTER (WHERE status = 'ok' AND "
        "cost_usd IS NULL) FROM api_images WHERE model_id = ?",
        [model],
    ).fetchone()
    done, refused, cost, unpriced = row
    return {"images": int(done or 0), "refused": int(refused or 0),
            "cost_usd": None if cost is None else round(float(cost), 4),
            "unpriced": int(unpriced or 0)}  # fmt: skip


def status_lines(study: Study) -> list[str]:
    """One line per API model: images done, refused, cost (``corpus-audit status``)."""
    if not study.table_exists("api_images"):
        return []
    models = [r[0] for r in study.con.execute(
        "SELECT DISTINCT model_id FROM api_images ORDER BY 1").fetchall()]  # fmt: skip
    lines = []
    for model in models:
        s = api_summary(study, model)
        cost = "cost unknown (no generate.api_prices entry)" if s["cost_usd"] is None else (
            f"${s['cost_usd']:.2f}" + (f" (+{s['unpriced']} unpriced)" if s["unpriced"] else ""))  # fmt: skip
        lines.append(
            f"{model}: {s['images']} image(s) from the API, {s['refused']} refused, {cost}; "
            f"{NOT_REPRODUCIBLE}"
        )
    return lines


def openai_images(model_id: str, settings: GenerationSettings, **options: Any) -> Any:
    """``openai:<model>``: the generator factory the ``GENERATORS`` registry names lazily."""
    return OpenAIImagesGenerator(model_id, settings, **options)


# what the backend declares (generators.GeneratorTraits): the generate stage commits each
# image as it arrives (ImagesSession, commit_answers); the factory takes the [generate] section
openai_images.traits = GeneratorTraits(per_image=True, needs_config=True)  # type: ignore[attr-defined]
