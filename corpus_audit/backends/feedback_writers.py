"""The FairCritic feedback writers the package ships (registered, lazily, by name in
:data:`corpus_audit.backends.feedback.WRITERS`): each a factory
``(spec, templates, roles, study) -> FeedbackWriter``
(:class:`corpus_audit.methods.pst.critic.FeedbackWriter`). Loaded only when the ``faircritic``
stage asks for a writer, so its imports (numpy, pandas, the PST methods) stand at the top.
"""

from __future__ import annotations

from typing import Any

from corpus_audit.backends.paraphrasers import transformers_completer
from corpus_audit.core.errors import ConfigError
from corpus_audit.methods.pst.critic import LMFeedback, TemplateFeedback


def template_writer(spec: str, templates: Any, roles: Any, study: Any) -> Any:
    """``template``: the templates file's ``[feedback]`` texts."""
    return TemplateFeedback(templates, roles)


def transformers_writer(spec: str, templates: Any, roles: Any, study: Any) -> Any:
    """``transformers:<local model or hub id>``: a local instruction-tuned LM writes the
    guidelines (:class:`corpus_audit.methods.pst.critic.LMFeedback`; template text when it says
    nothing)."""
    model = spec.partition(":")[2]
    if not model:
        raise ConfigError("pst.faircritic_writer: 'transformers:' needs a model path or id")
    complete = transformers_completer(model, device=study.config.engine.device)
    return LMFeedback(complete, templates, roles, name=model)
