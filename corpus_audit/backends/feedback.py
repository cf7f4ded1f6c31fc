"""FairCritic feedback writers by name (``pst.faircritic_writer``): a light module, so config
validation can take the names from :data:`WRITERS` without loading a model library (nor numpy
and the PST methods): its entries are lazy strings, and the shipped writers live in
:mod:`corpus_audit.backends.feedback_writers`.

A spec is ``name`` or ``name:argument`` (``transformers:/models/qwen2.5-0.5b-instruct``); a
factory ``(spec, templates, roles, study) -> FeedbackWriter``
(:class:`corpus_audit.methods.pst.critic.FeedbackWriter`). Registering a factory here is the only
step that makes a new writer usable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from corpus_audit.core.registry import Registry

# Feedback writers by the part of `pst.faircritic_writer` before ":" (the rest is their own).
WRITERS: Registry[Callable[..., Any]] = Registry("feedback writer")
WRITERS.register("template", "corpus_audit.backends.feedback_writers:template_writer")
WRITERS.register("transformers", "corpus_audit.backends.feedback_writers:transformers_writer")
