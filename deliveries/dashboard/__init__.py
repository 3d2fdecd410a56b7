"""The operations dashboard (``views.dashboard``), its queries and its SVG charts."""
