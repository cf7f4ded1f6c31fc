"""Each study.toml key declared once, read by one checker and the help (issue 32).

The declarations (type, default, constraints, help) of :mod:`corpus_audit.core.config` are
what the checker enforces and the help shows; the backends' settings objects are derived
from them (``derived_from``) instead of re-declaring and re-checking the keys.
"""

from __future__ import annotations

import dataclasses
import pickle
import typing
from pathlib import Path

import pytest

from corpus_audit.backends.api_client import ApiClient
from corpus_audit.backends.captioners import CaptionSettings
from corpus_audit.backends.embeddings import EmbedderSettings
from corpus_audit.backends.generators import GenerationSettings
from corpus_audit.backends.openai_images import ApiImageOptions
from corpus_audit.backends.storage import StoreOptions
from corpus_audit.backends.text_generators import SamplingSettings
from corpus_audit.backends.text_generators.openai_chat import ChatClientSettings
from corpus_audit.backends.text_generators.transformers_lm import LocalLMSettings
from corpus_audit.core.config import (
    RETIRED_KEYS,
    GenerateSection,
    StudyConfig,
    config_from_dict,
    load_config,
    section_classes,
    write_config,
)
from corpus_audit.core.config_edit import set_values
from corpus_audit.core.config_fields import (
    Cap,
    Help,
    Keys,
    MultipleOf,
    OneOf,
    Range,
    Rule,
    Text,
    check_type,
    hints,
    split_annotation,
)
from corpus_audit.core.config_help import setting
from corpus_audit.core.errors import ConfigError
from corpus_audit.stages.indicators.tagging import TaggerSettings
from corpus_audit.stages.label import FilterSettings

Annotated = typing.Annotated


@pytest.mark.parametrize(
    ("annotation", "value", "message"),
    [
        (Annotated[int, Range(ge=1)], 0, "k: 0 must be >= 1"),
        (Annotated[float, Range(gt=0)], 0, "k: 0.0 must be > 0"),
        (Annotated[float, Range(le=2)], 3, "k: 3.0 must be <= 2"),
        (Annotated[float, Range(ge=0.5, le=1)], 0.3, r"k: 0.3 is not in [0.5, 1]"),
        (Annotated[float, Range(gt=0, lt=1)], 1, r"k: 1.0 is not in (0, 1)"),
        (Annotated[float, Range(gt=0, le=1)], 0, r"k: 0.0 is not in (0, 1]"),
        (Annotated[float, Range(ge=0)], float("nan"), "k: nan must be >= 0"),
        (Annotated[int, Cap(10, "things")], 11, "k: 11 is above the maximum 10 (things)"),
        (Annotated[int, MultipleOf(8)], 12, "k: 12 is not a multiple of 8"),
        (Annotated[str, OneOf(("a", "b"))], "c", "k: 'c' is not one of ['a', 'b']"),
        (Annotated[str, Text("a file name")], " ", "k: expected a file name"),
        (Annotated[str, Text("a file name")], 3, "k: expected a file name"),
        (Annotated[str, Rule(str.isupper, "is not upper case")], "a", "k: 'a' is not upper"),
        (int, True, "k: expected int, got a boolean"),
        (int, "3", "k: expected int, got str '3'"),
        (bool, 1, "k: expected bool, got int 1"),
        (list[int], 3, "k: expected a list, got int 3"),
        (list[Annotated[int, Range(ge=0)]], [1, -1], r"k[1]: -1 must be >= 0"),
        (dict[str, Annotated[float, Range(ge=0)]], {"x": -2}, "k.x: -2.0 must be >= 0"),
        (Annotated[dict[str, int], Keys(("a",), "a letter")], {"b": 1}, "k.b: not a letter"),
    ],
)
def test_one_checker_names_key_value_and_range(annotation, value, message) -> None:
    with pytest.raises(ConfigError) as err:
        check_type("k", value, annotation)
    assert str(err.value).startswith(message)


def test_the_checker_returns_the_value_floats_for_ints() -> None:
    assert check_type("k", 3, Annotated[float, Range(ge=0)]) == 3.0
    assert isinstance(check_type("k", 3, float), float)
    assert check_type("k", [1], list[float]) == [1.0]
    assert check_type("k", {"x": 1}, dict[str, float]) == {"x": 1}  # tables kept as written


def test_every_key_is_declared_with_its_help_and_every_number_with_a_range() -> None:
    """A number without a range is a key someone forgot to bound (or a seed)."""
    unbounded = []
    for section, cls in section_classes().items():
        for name, annotation in hints(cls).items():
            base, extras = split_annotation(annotation)
            assert any(isinstance(e, Help) and e.text for e in extras), f"{section}.{name}"
            if base in (int, float) and len(extras) == 1:
                unbounded.append(f"{section}.{name}")
    assert unbounded == ["study.seed", "neighbors.ef_search"]  # llm.max_texts: capped (issue 33)


def test_the_help_shows_the_declaration() -> None:
    steps = setting("generate.steps")
    assert (steps.type, steps.default, steps.meaning) == ("int", "50", "denoising steps per image")
    assert setting("llm.genders").type == "list of str"
    assert setting("engine.workers").type == "table"


@pytest.mark.parametrize(
    ("settings", "section", "keys"),
    [
        (GenerationSettings, "generate", {"steps", "height", "width", "dtype", "nsfw_policy"}),
        (CaptionSettings, "recaption", {"max_new_tokens", "num_beams", "batch_size", "dtype"}),
        (SamplingSettings, "llm", {"temperature", "top_p", "max_tokens", "send_seed"}),
        (StoreOptions, "storage", {"endpoint_url", "region", "anonymous", "retries"}),
        (FilterSettings, "label", {"threshold", "min_face_fraction", "count_small_faces"}),
        (TaggerSettings, "indicators", {"use_names", "spacy_model", "ner_batch_size"}),
        (ChatClientSettings, "llm", {"concurrency", "n_per_request", "max_retries"}),
        (LocalLMSettings, "llm", {"batch_size", "dtype"}),
        (EmbedderSettings, "neighbors", {"precision", "batch_size", "max_seq_length"}),
    ],
)
def test_backend_settings_are_derived_from_their_section(settings, section, keys) -> None:
    declared = hints(section_classes()[section])
    derived = hints(settings)
    defaults = {f.name: f.default for f in dataclasses.fields(section_classes()[section])}
    for key in keys:
        assert derived[key] is declared[key]  # the declaration itself, not a copy
        assert getattr(settings(), key) == defaults[key]
    if "device" in derived:
        assert derived["device"] is hints(section_classes()["engine"])["device"]


def test_derived_settings_check_with_the_section_messages() -> None:
    with pytest.raises(ConfigError, match=r"^generate\.height: 12 is not a multiple of 8"):
        GenerationSettings(height=12)
    with pytest.raises(ConfigError, match=r"^engine\.device: 'tpu' is not auto"):
        GenerationSettings(device="tpu")
    with pytest.raises(ConfigError, match=r"^recaption\.max_new_tokens: 0 is not in \[1, 1024\]"):
        CaptionSettings(max_new_tokens=0)
    with pytest.raises(ConfigError, match=r"^min_new_tokens: 9 is not in 0..max_new_tokens"):
        CaptionSettings(min_new_tokens=9, max_new_tokens=8)  # its own rule across fields
    with pytest.raises(ConfigError, match=r"^llm\.top_p: 0.0 is not in \(0, 1\]"):
        SamplingSettings(top_p=0)
    with pytest.raises(ConfigError, match=r"^generate\.api_timeout: 0.0 must be > 0"):
        ApiImageOptions(timeout=0)
    # the same value refused in study.toml, with the same words
    with pytest.raises(ConfigError, match=r"generate\.height: 12 is not a multiple of 8"):
        config_from_dict({"generate": {"height": 12}}, Path("."))


def test_derived_settings_follow_the_config(tmp_path: Path) -> None:
    config = config_from_dict(
        {
            "generate": {"steps": 3, "guidance_scale": 2, "api_size": "1792x1024"},
            "engine": {"device": "cpu"},
            "recaption": {"max_new_tokens": 12, "prompt": "a photo of"},
            "llm": {"temperature": 0, "max_tokens": 9},
        },
        tmp_path,
    )
    generation = GenerationSettings.from_config(config)
    assert (generation.steps, generation.guidance_scale, generation.device) == (3, 2.0, "cpu")
    assert list(dataclasses.asdict(generation)) == [  # recorded with every image: same order
        "steps", "guidance_scale", "height", "width", "device", "dtype", "scheduler",
        "nsfw_policy", "channels_last", "compile",
    ]  # fmt: skip
    caption = CaptionSettings.from_config(config)
    assert (caption.max_new_tokens, caption.prompt, caption.device) == (12, "a photo of", "cpu")
    assert caption.min_new_tokens == 0 and caption.repetition_penalty == 1.0  # its own
    sampling = SamplingSettings.from_config(config)
    assert (sampling.temperature, sampling.max_tokens) == (0.0, 9)
    assert ApiImageOptions.from_config(config.generate).size == "1792x1024"
    assert GenerationSettings(**dataclasses.asdict(generation)) == generation  # regenerate
    for settings in (generation, caption, sampling):  # sent to spawned workers and Ray actors
        assert pickle.loads(pickle.dumps(settings)) == settings
    with pytest.raises(dataclasses.FrozenInstanceError):
        generation.steps = 4  # type: ignore[misc]


HTTP_FIELDS = ("base_url", "key_env", "timeout", "max_retries", "backoff", "max_backoff",
               "concurrency", "max_body_mb")  # fmt: skip


def test_the_http_client_settings_are_declared_once_and_mean_the_same() -> None:
    """The images client (generate.api_*) and the chat client (llm.*) derive the same HTTP
    settings from the same declarations (config_values.HTTP_*); retries count the requests
    after the first in both, and one constructor turns either into the client."""
    images, chat = hints(ApiImageOptions), hints(ChatClientSettings)
    for name in HTTP_FIELDS[2:]:
        assert images[name] is chat[name], name  # one declaration, two key names
    assert ApiImageOptions.config_keys["max_retries"] == "generate.api_max_retries"
    assert ChatClientSettings.config_keys["timeout"] == "llm.timeout_s"
    for options in (ApiImageOptions(max_retries=0), ChatClientSettings(max_retries=0)):
        client = ApiClient.from_settings(options, require_key=False)
        assert client.policy.max_retries == 0 and client.policy.max_attempts == 1
        assert client.timeout_setting == options.config_keys["timeout"]
    with pytest.raises(ConfigError, match=r"^llm\.max_retries: -1 must be >= 0"):
        ChatClientSettings(max_retries=-1)
    with pytest.raises(ConfigError, match=r"^generate\.api_max_retries: -1 must be >= 0"):
        ApiImageOptions(max_retries=-1)


def test_the_http_keys_sit_where_the_sections_declare_them() -> None:
    """``http_keys`` puts the six HTTP keys, each declared once, after the key it names, under
    the section's names and with its defaults (help, study.toml and hashes keep their order)."""
    generate = [f.name for f in dataclasses.fields(section_classes()["generate"])]
    at = generate.index("api_style")
    assert generate[at + 1 : at + 8] == [
        "api_concurrency", "api_timeout", "api_max_body_mb", "api_max_retries", "api_backoff",
        "api_max_backoff", "api_prices",
    ]  # fmt: skip
    llm = section_classes()["llm"]
    names = [f.name for f in dataclasses.fields(llm)]
    at = names.index("n_per_request")
    assert names[at + 1 : at + 8] == [
        "concurrency", "timeout_s", "max_body_mb", "max_retries", "backoff_s", "max_backoff_s",
        "batch_size",
    ]  # fmt: skip
    assert (llm().concurrency, llm().max_retries, GenerateSection().api_max_retries) == (8, 6, 5)
    assert hints(llm)["timeout_s"] is hints(GenerateSection)["api_timeout"]


def test_a_derived_class_reads_a_mapping_of_its_keys() -> None:
    """``from_config`` of ``{key: value}`` (a backend's keyword options by their key names):
    the keys given, the others at their defaults, keys of no field ignored."""
    chat = ChatClientSettings.from_config({"timeout_s": 30, "api_base": "http://h/v1", "x": 1})
    assert (chat.timeout, chat.base_url, chat.max_retries) == (30.0, "http://h/v1", 6)
    with pytest.raises(ConfigError, match=r"^llm\.n_per_request: 0 must be >= 1"):
        ChatClientSettings.from_config({"n_per_request": 0})


def test_defaults_of_the_derived_classes_are_the_sections() -> None:
    assert GenerationSettings() == GenerationSettings.from_config(StudyConfig())
    assert ApiImageOptions() == ApiImageOptions.from_config(GenerateSection())
    assert SamplingSettings() == SamplingSettings.from_config(StudyConfig())


def test_a_derived_class_names_only_declared_keys() -> None:
    from corpus_audit.core.config import derived_from

    with pytest.raises(TypeError, match=r"'stepz' is not a key of \[generate\]"):

        @derived_from(GenerateSection, "steps", "stepz")
        class Typo:
            pass

    with pytest.raises(TypeError, match=r"fields not named: \['extra'\]"):

        @derived_from(GenerateSection, "steps")
        class Forgotten:
            extra: int = 0


def test_a_retired_key_still_loads_and_is_gone_from_help_and_set(tmp_path: Path) -> None:
    """``label.decode_workers`` (no release reads it): an old study.toml that sets it loads,
    the config written back drops it, and neither the help nor ``set`` knows it."""
    assert "label.decode_workers" in RETIRED_KEYS
    (tmp_path / "study.toml").write_text("[label]\ndecode_workers = 4\nbatch_size = 8\n")
    config = load_config(tmp_path)
    assert config.label.batch_size == 8
    assert not hasattr(config.label, "decode_workers")
    write_config(config)
    assert "decode_workers" not in (tmp_path / "study.toml").read_text()
    with pytest.raises(ConfigError, match="decode_workers"):
        set_values(tmp_path, {"label.decode_workers": 3})
    with pytest.raises(Exception, match="decode_workers"):
        setting("label.decode_workers")


def test_a_renamed_key_loads_under_its_new_name(tmp_path: Path) -> None:
    """``generate.api_max_attempts = N`` (attempts) loads as ``api_max_retries = N - 1``
    (retries, the meaning ``llm.max_retries`` has); both names at once are refused, and the
    two clients' retry settings share one declaration."""
    (tmp_path / "study.toml").write_text("[generate]\napi_max_attempts = 4\n")
    assert load_config(tmp_path).generate.api_max_retries == 3
    (tmp_path / "study.toml").write_text("[generate]\napi_max_attempts = 4\napi_max_retries = 2\n")
    with pytest.raises(ConfigError, match="api_max_retries"):
        load_config(tmp_path)
    generate, llm = hints(section_classes()["generate"]), hints(section_classes()["llm"])
    for mine, theirs in (
        ("api_max_retries", "max_retries"),
        ("api_timeout", "timeout_s"),
        ("api_backoff", "backoff_s"),
        ("api_max_backoff", "max_backoff_s"),
        ("api_concurrency", "concurrency"),
        ("api_max_body_mb", "max_body_mb"),
    ):
        assert generate[mine] is llm[theirs]


def test_each_section_knows_its_name_in_study_toml() -> None:
    """A section names its keys (``section.key`` in every message) without asking
    :class:`StudyConfig` (the sections live in their own modules, below it)."""
    for name, cls in section_classes().items():
        assert cls.toml_name() == name
