"""Renderers: turn results into terminal, JSON, markdown or JUnit text. They never collect."""
