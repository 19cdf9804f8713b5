"""HTML rendering of the report: one Jinja2 template (autoescaped), inline CSS, no script, no external resource.

A page is a list of sections; a section holds blocks: ``chart`` (an ``<img>`` with a data URI), ``table``,
``text``, ``link`` (a relative link to a page beside this one, e.g. the uncached ``cost.html``), ``pre`` (collapsed
``<details>``). Builders in :mod:`rlvr.report.build` produce these plain dicts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["Num", "chart", "fmt", "pre", "render_page", "table", "text"]

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{ title }}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0; color: #222;
       background: #fafafa; }
header { background: #1f3b57; color: #fff; padding: 1rem 2rem; }
header h1 { margin: 0 0 .3rem 0; font-size: 1.5rem; }
nav a { color: #cfe3f7; margin-right: 1.2rem; text-decoration: none; }
main { padding: 0 2rem 2rem 2rem; max-width: 1400px; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; margin: 1.2rem 0; padding: .6rem 1.2rem 1rem; }
h2 { border-bottom: 1px solid #eee; padding-bottom: .3rem; }
h3 { margin: 1.2rem 0 .4rem; font-size: 1.05rem; }
.status-notrun { color: #a33; font-weight: 600; }
.note { color: #555; font-size: .9rem; }
table { border-collapse: collapse; font-size: .85rem; margin: .4rem 0 1rem; }
th, td { border: 1px solid #ddd; padding: .25rem .55rem; text-align: right; white-space: nowrap; }
th { background: #f0f3f6; }
td:first-child, th:first-child, td.text { text-align: left; }
div.scroll { overflow-x: auto; }
img.chart { max-width: 100%; height: auto; display: block; margin: .3rem 0 1rem; }
details { margin: .5rem 0; }
pre { background: #f6f8fa; padding: .6rem; overflow-x: auto; font-size: .8rem; max-height: 40rem; }
ul.notrun { columns: 2; }
</style>
</head>
<body>
<header>
<h1>{{ title }}</h1>
<nav>{% for s in sections %}<a href="#{{ s.id }}">{{ s.title }}</a>{% endfor %}</nav>
</header>
<main>
{% if intro %}<section id="overview"><h2>Overview</h2>
{% for b in intro %}{{ block(b) }}{% endfor %}
</section>{% endif %}
{% for s in sections %}
<section id="{{ s.id }}">
<h2>{{ s.title }}</h2>
{% if not s.blocks %}<p class="status-notrun">not run: {{ s.missing or "no metrics files yet" }}</p>{% endif %}
{% for b in s.blocks %}{{ block(b) }}{% endfor %}
</section>
{% endfor %}
</main>
</body>
</html>
"""

_BLOCK = """{% macro block(b) -%}
{% if b.kind == "chart" -%}
{% if b.title %}<h3>{{ b.title }}</h3>{% endif %}
<img class="chart" src="{{ b.uri }}" alt="{{ b.alt }}">
{%- elif b.kind == "table" -%}
{% if b.title %}<h3>{{ b.title }}</h3>{% endif %}
{% if b.note %}<p class="note">{{ b.note }}</p>{% endif %}
<div class="scroll"><table><thead><tr>{% for c in b.columns %}<th>{{ c }}</th>{% endfor %}</tr></thead>
<tbody>{% for r in b.rows %}<tr>{% for c in r %}<td{% if not c.num %} class="text"{% endif %}>{{ c.v }}</td>{% endfor %}
</tr>{% endfor %}</tbody></table></div>
{%- elif b.kind == "text" -%}
<p class="{{ b.cls or '' }}">{{ b.text }}</p>
{%- elif b.kind == "link" -%}
<p><a href="{{ b.href }}">{{ b.text }}</a></p>
{% if b.note %}<p class="note">{{ b.note }}</p>{% endif %}
{%- elif b.kind == "list" -%}
{% if b.title %}<h3>{{ b.title }}</h3>{% endif %}
<ul class="{{ b.cls or '' }}">{% for i in b["items"] %}<li>{{ i }}</li>{% endfor %}</ul>
{%- elif b.kind == "pre" -%}
<details><summary>{{ b.title }}</summary><pre>{{ b.text }}</pre></details>
{%- endif %}
{%- endmacro %}"""


def fmt(v: Any, digits: int = 4) -> str:
    """A table cell: ``None``/NaN → ``"—"``, floats to ``digits`` significant digits, bools/ints/strings as is."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    if isinstance(v, list | tuple):
        return ", ".join(fmt(x, digits) for x in v)
    return str(v)


def chart(uri: str, title: str = "", alt: str = "") -> dict[str, Any]:
    """A chart block (``uri`` from :mod:`rlvr.report.charts`)."""
    return {"kind": "chart", "uri": uri, "title": title, "alt": alt or title or "chart"}


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], title: str = "", note: str = "") -> dict[str, Any]:
    """A table block; cells are formatted with :func:`fmt`; numbers (and :class:`Num` strings) align right."""
    def cell(c: Any) -> dict[str, Any]:
        num = isinstance(c, Num) or (isinstance(c, int | float) and not isinstance(c, bool)) or c is None
        return {"v": fmt(c), "num": num}

    return {"kind": "table", "columns": list(columns), "rows": [[cell(c) for c in r] for r in rows], "title": title,
            "note": note}


class Num(str):
    """A preformatted numeric cell (e.g. ``"0.41 [0.33, 0.5]"``): aligned right like a number."""


def text(s: str, cls: str = "") -> dict[str, Any]:
    """A paragraph block (``cls="note"`` for a small grey note, ``"status-notrun"`` for a red "not run")."""
    return {"kind": "text", "text": s, "cls": cls}


def pre(title: str, s: str) -> dict[str, Any]:
    """A collapsed preformatted block."""
    return {"kind": "pre", "title": title, "text": s}


def render_page(title: str, sections: Sequence[dict[str, Any]], intro: Sequence[dict[str, Any]] = ()) -> str:
    """The whole HTML page. ``sections``: ``{"id", "title", "blocks": [...], "missing": str}``; a section without
    blocks shows "not run: <missing>"."""
    from jinja2 import Environment

    env = Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    macros = env.from_string(_BLOCK).module
    tpl = env.from_string(_TEMPLATE)
    return tpl.render(title=title, sections=list(sections), intro=list(intro), block=macros.block)
