"""A language model's answer as one line of text (pure).

Paraphrasers (:mod:`corpus_audit.backends.paraphrasers`) and FairCritic's language-model
feedback writer (:class:`corpus_audit.methods.pst.critic.LMFeedback`) keep the first line a
model writes and drop the quotes it often puts around it.
"""

from __future__ import annotations


def clean_output(text: str) -> str:
    """A model's answer as a prompt: first non-empty line, outer quotes and whitespace removed."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line.strip("\"'“”‘’ ").strip()
    return ""
