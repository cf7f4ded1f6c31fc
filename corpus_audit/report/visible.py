"""Text from strangers made visible: control characters written as escapes, for pages and figures.

Model names, occupations, captions and prompts come from corpora, manifests and vote files. A
control character among them (ESC, BEL, the C1 controls) is invalid in XML, so an SVG figure
holding one cannot be opened, and one in a page is a parse error; a bidi override (U+202E)
reorders the text around it, so a name can pose as another. :func:`visible` writes each such
character as an escape (``\\x1b``, ``\\u202e``), as the CLI does for terminals
(:func:`corpus_audit.core.errors.printable`): the name is still shown, inert. Tab, newline and
carriage return are kept (they are valid XML and HTML whitespace).

:func:`figure_text` is :func:`visible` for matplotlib: a ``$`` is written ``\\$`` as well, so
a name with dollars is shown as written, not parsed as mathtext (``$\\frac$`` made
``savefig`` raise).
"""

from __future__ import annotations

import re
from typing import Any

# C0 but tab, newline, carriage return; DEL and C1; the bidi format characters; lone
# surrogates (not UTF-8) and U+FFFE / U+FFFF (not XML characters)
_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
    "\ud800-\udfff\ufffe\uffff]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every unsafe character (see the module docstring) written as an escape;
    everything else (letters of any script, emoji, tab, newline) is kept."""
    return _UNSAFE.sub(_escape, text)


def finalize(value: Any) -> Any:
    """Jinja's ``finalize``: every ``{{ ... }}`` that prints text prints it :func:`visible`
    (markup made by a filter such as ``join`` too: control characters in it came from data,
    and an escape sequence holds no HTML-special character); other values are unchanged."""
    from markupsafe import Markup

    if isinstance(value, Markup):
        return Markup(visible(str(value)))
    if isinstance(value, str):
        return visible(value)
    return value


def figure_text(text: str) -> str:
    """:func:`visible`, and ``$`` written ``\\$`` (shown as ``$``, never parsed as math)."""
    return visible(text).replace("$", "\\$")


def make_visible(fig: Any) -> None:
    """Every text of the matplotlib figure ``fig`` through :func:`figure_text`: titles, axis
    labels, legends, annotations, and the tick labels that name things (a list of labels,
    categories: their formatter is wrapped, as tick labels are made again at each draw;
    numeric formatters are left alone). Call it once, before the figure is first drawn."""
    from matplotlib.category import StrCategoryFormatter
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter, FuncFormatter

    for text in fig.findobj(Text):
        text.set_text(figure_text(text.get_text()))
    naming = (FixedFormatter, FuncFormatter, StrCategoryFormatter)  # set_ticklabels: Func
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for get, put in (
                (axis.get_major_formatter, axis.set_major_formatter),
                (axis.get_minor_formatter, axis.set_minor_formatter),
            ):
                formatter = get()
                if isinstance(formatter, naming):
                    put(_visible_formatter(formatter))


def _visible_formatter(inner: Any) -> Any:
    """A formatter that gives ``inner``'s labels through :func:`figure_text`."""
    from matplotlib.ticker import Formatter

    class Visible(Formatter):
        def set_locs(self, locs: Any) -> None:
            inner.set_locs(locs)

        def __call__(self, x: Any, pos: Any = None) -> str:
            return figure_text(str(inner(x, pos)))

        def format_ticks(self, values: Any) -> list[str]:
            return [figure_text(str(v)) for v in inner.format_ticks(values)]

        def get_offset(self) -> str:
            return figure_text(str(inner.get_offset()))

    return Visible()
