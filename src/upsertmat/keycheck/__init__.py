"""``upsertmat check-keys``: what in a changelog breaks the guarantee the materializer relies on."""

from .changelog import check_changelog
from .checker import Finding, KeyChecker, Report, Violation
from .render import render_json, render_text, verdict

__all__ = [
    "Finding",
    "KeyChecker",
    "Report",
    "Violation",
    "check_changelog",
    "render_json",
    "render_text",
    "verdict",
]
