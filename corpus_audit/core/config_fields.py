"""A ``study.toml`` key is declared once: type, range and help beside the field, one checker.

A setting is a dataclass field whose annotation carries everything about it::

    steps: Annotated[int, Range(ge=1), Help("denoising steps per image")] = 50

The constraints (:class:`Range`, :class:`Cap`, :class:`OneOf`, :class:`Registered`,
:class:`MultipleOf`, :class:`Keys`, :class:`Text`, :class:`Rule`, :class:`Check`) are read by
one checker, :func:`check_type` (type, then each constraint, recursing into lists and tables),
and :class:`Help` by the generated help (:mod:`corpus_audit.core.config_help`). A section's
``rules()`` holds only the rules that relate several fields. Every error is a
:class:`~corpus_audit.core.errors.ConfigError` naming the key, the value and what is allowed
(``generate.steps: 0 must be >= 1``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from corpus_audit.core.errors import ConfigError
from corpus_audit.core.registry import load

__all__ = [
    "Annotated",
    "Cap",
    "Check",
    "Help",
    "Keys",
    "MultipleOf",
    "OneOf",
    "Range",
    "Registered",
    "Rule",
    "Text",
    "check_fields",
    "check_type",
    "field_help",
    "hints",
    "split_annotation",
]


@dataclass(frozen=True)
class Help:
    """What a setting means (one paragraph, shown by ``--help``)."""

    text: str


class Constraint:
    """A rule on one value; :meth:`check` raises :class:`ConfigError` naming ``key``."""

    #: what a value of the wrong type is, in the message (``expected a file name``); "" = the type
    expected: str = ""

    def check(self, key: str, value: Any) -> None:
        raise NotImplementedError


def _number(x: float) -> str:
    return repr(x)


def _bound(inclusive: str, at: float | None, exclusive: str, past: float | None) -> str:
    """One side of a range: ``>= 1`` when ``at`` is set, else ``> 0`` when ``past`` is, else ""."""
    if at is not None:
        return f"{inclusive} {_number(at)}"
    return f"{exclusive} {_number(past)}" if past is not None else ""


@dataclass(frozen=True)
class Range(Constraint):
    """A number in a range: ``ge``/``gt`` lower bound (inclusive/exclusive), ``le``/``lt``
    upper bound. ``Range(ge=1)``: ``must be >= 1``; ``Range(ge=0, le=1)``: ``is not in [0, 1]``.
    ``finite``: NaN and the infinities are refused (``must be a finite number``)."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    finite: bool = False

    def text(self) -> str:
        """``>= 1``, ``> 0`` or ``in [0, 1]`` / ``in (0, 1]``."""
        low = _bound(">=", self.ge, ">", self.gt)
        high = _bound("<=", self.le, "<", self.lt)
        if low and high:
            left = "[" if self.ge is not None else "("
            right = "]" if self.le is not None else ")"
            lo = self.ge if self.ge is not None else self.gt
            hi = self.le if self.le is not None else self.lt
            return f"in {left}{_number(lo)}, {_number(hi)}{right}"  # type: ignore[arg-type]
        return low or high

    def check(self, key: str, value: Any) -> None:
        if self.finite and isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key}: {value} must be a finite number")
        ok = (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
        )
        if not ok:
            text = self.text()
            verb = "is not" if text.startswith("in ") else "must be"
            raise ConfigError(f"{key}: {value} {verb} {text}")


@dataclass(frozen=True)
class Cap(Constraint):
    """A count's documented maximum (docs/reliability.md): past it the machine goes down."""

    maximum: int
    why: str

    def check(self, key: str, value: Any) -> None:
        if value > self.maximum:
            raise ConfigError(f"{key}: {value} is above the maximum {self.maximum:,} ({self.why})")


@dataclass(frozen=True)
class MultipleOf(Constraint):
    """An integer multiple of ``step`` (image sizes: multiples of 8)."""

    step: int

    def check(self, key: str, value: Any) -> None:
        if value % self.step:
            raise ConfigError(f"{key}: {value} is not a multiple of {self.step}")


@dataclass(frozen=True)
class OneOf(Constraint):
    """One of fixed ``choices``."""

    choices: tuple[str, ...]

    def check(self, key: str, value: Any) -> None:
        if value not in self.choices:
            raise ConfigError(f"{key}: {value!r} is not one of {list(self.choices)}")


@dataclass(frozen=True)
class Registered(Constraint):
    """One of ``also`` or a name of the registry ``"module:NAME"``
    (:class:`~corpus_audit.core.registry.Registry`, or a function returning the names), looked
    up when the value is checked, so a backend registered after the config module was
    imported is accepted. The registry modules import no model library at load time, so
    checking stays cheap."""

    registry: str
    also: tuple[str, ...] = ()

    def check(self, key: str, value: Any) -> None:
        found = load(self.registry)
        names = self.also + tuple(found.names() if hasattr(found, "names") else found())
        if value not in names:
            raise ConfigError(f"{key}: {value!r} is not one of {list(names)}")


@dataclass(frozen=True)
class Keys(Constraint):
    """A table whose keys are among ``choices`` (``what``: what such a key is)."""

    choices: tuple[str, ...]
    what: str

    def check(self, key: str, value: Any) -> None:
        for name in value:
            if name not in self.choices:
                raise ConfigError(
                    f"{key}.{name}: not {self.what} (one of {', '.join(self.choices)})"
                )


@dataclass(frozen=True)
class Text(Constraint):
    """A non-blank string; anything else is ``expected <what>``."""

    expected: str = "a text"

    def check(self, key: str, value: Any) -> None:
        if not value.strip():
            raise ConfigError(f"{key}: expected {self.expected}")


@dataclass(frozen=True)
class Rule(Constraint):
    """``test(value)`` must hold, else ``<key>: <value!r> <fails>``."""

    test: Callable[[Any], bool]
    fails: str

    def check(self, key: str, value: Any) -> None:
        if not self.test(value):
            raise ConfigError(f"{key}: {value!r} {self.fails}")


@dataclass(frozen=True)
class Check(Constraint):
    """``function(key, value)`` raises :class:`ConfigError` itself (a value with a grammar:
    a memory size, an image source); ``function`` may be a ``"module:name"`` string, loaded
    when the value is checked (a backend module that imports no model library)."""

    function: Callable[[str, Any], None] | str

    def check(self, key: str, value: Any) -> None:
        function = load(self.function) if isinstance(self.function, str) else self.function
        function(key, value)


def split_annotation(annotation: Any) -> tuple[Any, tuple[Any, ...]]:
    """``Annotated[T, a, b]`` -> ``(T, (a, b))``; any other annotation -> ``(it, ())``."""
    if typing.get_origin(annotation) is Annotated:
        return annotation.__origin__, annotation.__metadata__
    return annotation, ()


def _type_error(key: str, value: Any, expected: str, constraints: Sequence[Any]) -> ConfigError:
    custom = next((c.expected for c in constraints if getattr(c, "expected", "")), "")
    if custom:
        return ConfigError(f"{key}: expected {custom}")
    if isinstance(value, bool):
        return ConfigError(f"{key}: expected {expected}, got a boolean")
    return ConfigError(f"{key}: expected {expected}, got {type(value).__name__} {value!r}")


def check_type(key: str, value: Any, annotation: Any) -> Any:
    """``value`` checked against ``annotation`` (a type, possibly ``Annotated`` with
    constraints): the type (ints are accepted, and returned as floats, where floats are;
    booleans are not numbers), list items and table values (with their own annotations),
    then each constraint. Returns the value; raises :class:`ConfigError` naming ``key``."""
    base, constraints = split_annotation(annotation)
    origin = typing.get_origin(base)
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    elif base in (int, float, str, bool):
        if isinstance(value, bool) is not (base is bool) or not isinstance(value, base):
            raise _type_error(key, value, base.__name__, constraints)
    elif origin is list:
        if not isinstance(value, list):
            raise _type_error(key, value, "a list", constraints)
        (item,) = typing.get_args(base)
        value = [check_type(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
    elif origin is dict:
        if not isinstance(value, dict):
            raise _type_error(key, value, "a table", constraints)
        _, item = typing.get_args(base)
        for name, v in value.items():
            check_type(f"{key}.{name}", v, item)  # checked, kept as written (hashes)
    elif origin in (typing.Union, types.UnionType):
        pass  # a union: a Check of the key tells its members apart (lexicon.prompts)
    for constraint in constraints:
        if isinstance(constraint, Constraint):
            constraint.check(key, value)
    return value


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    """The annotations of ``cls`` with their constraints (evaluated once per class)."""
    return typing.get_type_hints(cls, include_extras=True)


def field_help(cls: type) -> dict[str, str]:
    """``{field name: meaning}`` of every field of the dataclass ``cls`` (its :class:`Help`)."""
    hints_ = hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        _, extras = split_annotation(hints_[f.name])
        out[f.name] = next((e.text for e in extras if isinstance(e, Help)), "")
    return out


def check_fields(obj: Any, prefix: str | dict[str, str]) -> None:
    """Check every field of the dataclass instance ``obj`` against its annotation, in place
    (ints become floats where floats are declared). ``prefix``: the section name of the keys
    in messages, or ``{field: "section.key"}``."""
    annotations = hints(type(obj))
    for f in dataclasses.fields(obj):
        if not f.metadata.get("file", True):
            continue
        key = prefix.get(f.name, f.name) if isinstance(prefix, dict) else f"{prefix}.{f.name}"
        value = check_type(key, getattr(obj, f.name), annotations[f.name])
        object.__setattr__(obj, f.name, value)
