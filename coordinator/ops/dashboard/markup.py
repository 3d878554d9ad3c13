"""HTML built by functions that escape every value they are handed.

Group ids, client ids, hosts and topic names are user input (any client picks them), so the pages
never format raw strings into HTML: text goes through :func:`escape`, and only :class:`Markup`
(what these functions return) passes unescaped. No template engine: the pages are a few tables.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from urllib.parse import quote

__all__ = ["Markup", "escape", "el", "join", "path_segment", "page"]


class Markup(str):
    """A string that is already HTML: :func:`escape` leaves it as it is."""

    __slots__ = ()


def escape(value: object) -> Markup:
    if isinstance(value, Markup):
        return value
    return Markup(html.escape("" if value is None else str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Markup:
    return Markup(sep.join(escape(p) for p in parts))


def el(tag: str, *children: object, **attrs: object) -> Markup:
    """``<tag attrs>children</tag>``; attribute names take ``_`` for ``-`` and a trailing ``_``
    for Python keywords (``class_``); True writes a bare attribute, None/False leaves it out."""
    parts = [tag]
    for name, value in attrs.items():
        if value is None or value is False:
            continue
        name = name.rstrip("_").replace("_", "-")
        parts.append(name if value is True else f'{name}="{escape(value)}"')
    opening = "<" + " ".join(parts) + ">"
    if tag in ("input", "br", "meta", "link"):
        return Markup(opening)
    return Markup(opening + "".join(escape(c) for c in children) + f"</{tag}>")


def path_segment(value: str) -> str:
    """A group id or topic as one URL path segment (``/`` and everything else percent-encoded)."""
    return quote(value, safe="")


NAV = (("/", "Groups"), ("/topics", "Topics"), ("/cluster", "Cluster"))


def page(title: str, body: object, *, active: str = "") -> str:
    """A whole page: the shared head (the package's stylesheet and script, no CDN) and navigation."""
    nav = join(el("a", label, href=href, class_="active" if href == active else None) for href, label in NAV)
    return "<!DOCTYPE html>\n" + el(
        "html",
        el("head", Markup('<meta charset="utf-8">'),
           Markup('<meta name="viewport" content="width=device-width, initial-scale=1">'),
           el("title", f"{title} · groupcoord"),
           Markup('<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">'),
           Markup('<link rel="stylesheet" href="/static/dashboard.css">'),
           Markup('<script src="/static/dashboard.js" defer></script>')),
        el("body",
           el("header", el("span", "groupcoord", class_="brand"), el("nav", nav)),
           el("main", el("h1", title), body)),
        lang="en")
