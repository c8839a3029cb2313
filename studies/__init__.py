"""Research studies over simspec: each module is a script (`python -m studies.NAME` from the
repository root) that prints the figures the README and the paper READMEs quote. Unlike bench/
(timings over the public API), a study may use the reference implementations in tests/reference.
"""
