"""The suite against a program under test (``--upsertmat-cmd``, ``MaterializerTests.command``).

Internal to the suite: :class:`~.suite.ProgramSuite` is what each ``MaterializerTests`` test calls
when a command is set; :mod:`.checks` feeds batches of streams to one run of the program and
compares with the model input by input; :mod:`.session` feeds many streams to one running program
(``--upsertmat-scenarios-in-session``). The protocol itself, which a third party implements, is
:mod:`upsertmat.conformance.protocol`.
"""
