"""FairCritic feedback writers by name (``pst.faircritic_writer``): a light module, so config
validation can take the names from :data:`WRITERS` without loading a model library (nor numpy
and the PST methods: the writers import them when called).

A spec is ``name`` or ``name:argument`` (``transformers:/models/qwen2.5-0.5b-instruct``); a
factory ``(spec, templates, roles, study) -> FeedbackWriter``
(:class:`corpus_audit.methods.pst.critic.FeedbackWriter`). Registering a factory here is the only
step that makes a new writer usable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corpus_audit.core.errors import ConfigError
from corpus_audit.core.registry import Registry


def template_writer(spec: str, templates: Any, roles: Any, study: Any) -> Any:
    """``template``: the templates file's ``[feedback]`` texts."""
    # not at the top: config validation loads WRITERS, and the critic pulls numpy and pandas
    from corpus_audit.methods.pst.critic import TemplateFeedback

    return TemplateFeedback(templates, roles)


def transformers_writer(spec: str, templates: Any, roles: Any, study: Any) -> Any:
    """``transformers:<local model or hub id>``: a local instruction-tuned LM writes the
    guidelines (:class:`corpus_audit.methods.pst.critic.LMFeedback`; template text when it says
    nothing)."""
    # not at the top: config validation loads WRITERS; these pull numpy, pandas and transformers
    from corpus_audit.backends.paraphrasers import transformers_completer
    from corpus_audit.methods.pst.critic import LMFeedback

    model = spec.partition(":")[2]
    if not model:
        raise ConfigError("pst.faircritic_writer: 'transformers:' needs a model path or id")
    complete = transformers_completer(model, device=study.config.engine.device)
    return LMFeedback(complete, templates, roles, name=model)


# Feedback writers by the part of `pst.faircritic_writer` before ":" (the rest is their own).
WRITERS: Registry[Callable[..., Any]] = Registry("feedback writer")
WRITERS.register("template", template_writer)
WRITERS.register("transformers", transformers_writer)
