"""Coverage-guided fuzz harnesses (issue 22): one ``fuzz_<name>.py`` per input edge.

See ``harness.py`` for the convention every harness follows, ``run.py`` to run one with atheris,
``test_regressions.py`` for the replay the normal test suite does.
"""
