"""The conformance suite of issue 43: programs as data, their runner and report (see test_conformance.py)."""
