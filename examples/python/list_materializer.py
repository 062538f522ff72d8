"""A minimal sink upsert materializer without TTL, for the conformance suite.

pytest --upsertmat-impl=list_materializer:factory   (from this directory)
"""

from upsertmat.spec import Change, RowKind, Unsupported


class ListMaterializer:
    """Rules 1-11 of docs/spec.md with one Python list of rows per sink key."""

    def __init__(self, keys):
        self.keys = keys
        self.retract_misses = 0  # rule 7: retractions that matched nothing
        self._rows = {}  # context key -> stored rows, oldest first

    def process(self, change):
        context = self.keys.context_key(change.row)
        rows = self._rows.setdefault(context, [])
        wanted = self.keys.match_key(change.row)
        first = next((i for i, row in enumerate(rows) if self.keys.match_key(row) == wanted), None)
        if change.kind.is_add:  # rules 3-5
            emitted = Change(RowKind.UPDATE_AFTER if rows else RowKind.INSERT, change.row)
            if first is not None and self.keys.has_upsert_key:
                rows[first] = change.row
            else:
                rows.append(change.row)
            return emitted
        if first is None:  # rule 7
            self.retract_misses += 1
            if not rows:
                del self._rows[context]
            return None
        was_last = first == len(rows) - 1
        del rows[first]  # rule 6
        if not rows:  # rule 8
            del self._rows[context]
            return Change(RowKind.DELETE, change.row)
        return Change(RowKind.UPDATE_AFTER, rows[-1]) if was_last else None  # rules 9, 10

    def advance_time(self, now):
        pass  # no TTL: the clock changes nothing

    def close(self):
        pass


def factory(keys, settings):
    """The suite's entry point: (Keys, Settings) -> Materializer."""
    if settings.ttl.enabled:
        raise Unsupported("no TTL: this implementation keeps every row until it is retracted")
    return ListMaterializer(keys)
