"""Telling a URL (``s3://bucket/key``) from a local path; the stores themselves are read by
:mod:`corpus_audit.backends.storage`.

A URL is ``scheme://rest`` with a scheme of two characters or more (so a Windows drive letter
``C:/`` is a path). ``file://`` URLs are local paths (:func:`local_path`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://")
# a URL anywhere in a text (an option of a backend written as "openai:http://...")
_ANY_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]+)://([^\s/?#]*)")

# where each store takes its credentials instead (docs/storage.md)
CREDENTIAL_MECHANISMS = (
    "s3: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, AWS_PROFILE or ~/.aws; gs: "
    "GOOGLE_APPLICATION_CREDENTIALS or gcloud; hf: HF_TOKEN; an API: the variable its "
    "api_key_env names; see docs/storage.md"
)


def scheme(spec: str) -> str:
    """The lower-case scheme of ``spec`` (``s3``, ``gs``, ``hf``...), "" for a plain path."""
    m = _URL.match(str(spec))
    return m.group(1).lower() if m else ""


def is_url(spec: str) -> bool:
    """Whether ``spec`` names an object in a store (a URL whose scheme is not ``file``)."""
    return scheme(spec) not in ("", "file")


def local_path(spec: str) -> str:
    """``spec`` with a leading ``file://`` removed (``file:///data/x`` -> ``/data/x``)."""
    return str(spec)[len("file://") :] if scheme(spec) == "file" else str(spec)


def has_credentials(text: str) -> bool:
    """Whether ``text`` holds a URL with credentials in its authority: a user name or
    password (``http://bob:pw@host``, ``s3://KEY:SECRET@bucket``), or a ``:`` not followed
    by a port (``s3://KEY:SECRET/with/slash@bucket`` is split at the secret's ``/``)."""
    for match in _ANY_URL.finditer(str(text)):
        authority = re.sub(r"\[[^\]]*\]", "", match.group(2))  # an IPv6 literal's colons
        if "@" in authority:
            return True
        host, colon, port = authority.partition(":")
        if colon and port and not port.isdigit():
            return True
    return False


def _strings(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """``(where, text)`` of every string in plain config data (lists and tables walked)."""
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(str(key), f"{where}.{key}" if where else str(key))
            yield from _strings(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _strings(item, f"{where}[{i}]")


def credential_keys(data: Any) -> list[str]:
    """The keys (``corpus.paths[0]``, ``storage.endpoint_url``) of config data whose value
    holds a URL with credentials (:func:`has_credentials`)."""
    return list(dict.fromkeys(where for where, text in _strings(data, "") if has_credentials(text)))


def credentials_refused(keys: list[str], source: str) -> str:
    """The one line refusing credentials in ``keys``; it never quotes their values."""
    return (
        f"{source}: {', '.join(keys)}: a URL with a user name or password is refused: "
        "credentials are never stored in a study (study.toml, its tables, the report, an "
        f"export); give them through the store's own mechanisms ({CREDENTIAL_MECHANISMS})"
    )
