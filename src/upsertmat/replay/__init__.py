"""``upsertmat replay`` as a library of its parts: a JSON Lines changelog through a materializer.

- :mod:`.jsonl`: the formats (parse an input line, format an output line, dead letters);
- :mod:`.source`: the input (a file or stdin), read line by line;
- :mod:`.processing`: one line applied (parse, check, materialize, watermark, misses);
- :mod:`.sink`: the output and the dead-letter file, with their lengths and truncation;
- :mod:`.commits`: the commit points (with ``--state-dir``, through the persistence session);
- :mod:`.run`: :func:`~.run.replay`, the loop and what each way of stopping means;
- :mod:`.signals`, :mod:`.progress`, :mod:`.messages`, :mod:`.failures`: the rest of a run.

The command (``upsertmat/commands/replay.py``) parses the flags into
:class:`~.run.ReplayOptions` and calls :func:`~.run.replay`.
"""
