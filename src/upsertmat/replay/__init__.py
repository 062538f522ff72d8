"""Replaying a JSON Lines changelog through a materializer: the input and output formats."""
