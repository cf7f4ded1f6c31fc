"""The one renderer of the package: Jinja2 over ``report/templates`` with autoescape on.

Every printed value also goes through :func:`corpus_audit.report.visible.finalize`: control
characters and bidi overrides in names and corpus text are shown as escapes (``\\x1b``).

The report stage, the amplify page, the who-and-how page and the battles voting page all render
through :func:`render`; sections build plain data (dicts and lists) and never HTML.
"""

from __future__ import annotations

from typing import Any

from corpus_audit.core.metrics import arrow_legend, format_value, header
from corpus_audit.report.visible import finalize

TEMPLATE = "report.html.j2"


def render(ctx: dict[str, Any], template: str = TEMPLATE) -> str:
    """Render a template of ``report/templates`` (the report by default) with autoescape on."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("corpus_audit.report", "templates"),
        autoescape=True,  # captions, prompts and paths are untrusted text
        finalize=finalize,  # ... and may hold control characters: shown as escapes
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct"] = _pct
    env.filters["pval"] = _pval
    env.globals["col"] = header  # every column header comes from corpus_audit.core.metrics
    env.globals["arrow_legend"] = arrow_legend()
    return env.get_template(template).render(**ctx)


def _num(value: Any, digits: int = 1) -> str:
    return format_value(value, digits, "–")


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value:.1f}"


def _pval(value: Any) -> str:
    if value is None:
        return "–"
    return "<0.001" if value < 0.001 else f"{value:.3g}"
