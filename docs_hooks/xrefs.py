"""MkDocs hook (``hooks:`` in mkdocs.yml): the docstrings' Sphinx cross-reference roles become links in the API pages.

The docstrings write references the Sphinx way, ``:func:`rlvr.layout.read_metrics```; mkdocstrings renders docstrings
as Markdown, where that shows as the text ``:func:`` before a code span. After a page is rendered this hook turns
every ``:role:<code>target</code>`` (roles ``func class meth mod attr data exc obj``; a leading ``~`` keeps only
the last dotted part as the title, as Sphinx does) into an optional mkdocs-autorefs reference, which the autorefs
plugin resolves when the whole site is known (``on_env``): a link where ``target`` is a documented object of this
site (a full dotted path), plain code otherwise (a relative name, the standard library), with no warning either way.
"""

from __future__ import annotations

import html
import re
from typing import Any

# a name wrapped across docstring lines keeps its line break inside the code span: removed
ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):<code>(~?)([\w.]+(?:\s+[\w.]+)*)(\(\))?</code>")


def xref(match: re.Match[str]) -> str:
    """One ``:role:<code>…</code>`` match as an optional ``<autoref>`` element (module doc)."""
    tilde, target, call = match.group(1), re.sub(r"\s+", "", match.group(2)), match.group(3) or ""
    title = (target.rsplit(".", 1)[-1] if tilde else target) + call
    return f'<autoref identifier="{html.escape(target)}" optional><code>{html.escape(title)}</code></autoref>'


def on_page_content(content: str, page: Any, config: Any, files: Any) -> str:
    """Rewrite the cross-reference roles of a rendered page (module doc)."""
    return ROLE.sub(xref, content)
