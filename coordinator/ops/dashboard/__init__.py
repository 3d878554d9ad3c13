"""The web dashboard on the ops HTTP listener (issue 34): groups, one group's members, partitions,
lag chart and epoch timeline, the offset-reset form, topics and the cluster — server-rendered HTML
with the package's own CSS and script (no CDN, no build step) and the same data as JSON under
``/api/``. ``add_routes`` is what the listener calls; routes.py says how a reset is guarded."""

from __future__ import annotations

from .routes import add_routes

__all__ = ["add_routes"]
