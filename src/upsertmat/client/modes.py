"""The result modes' names and the tableau formats (no third-party import: the parsers use them)."""

RESULT_MODES = ("table", "changelog", "tableau")
TABLEAU_FORMATS = ("text", "jsonl")
