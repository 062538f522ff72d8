"""upsertmat.conformance — the reusable conformance suite (see docs/conformance.md)."""
