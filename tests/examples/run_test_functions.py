"""run_test_functions.py FILE: runs the test_* functions of the pytest file FILE, with pytest when it is
installed and one by one otherwise (the examples take no fixtures), so ctest checks docs/memory_plan.md's pytest
example on machines without pytest too."""
import importlib.util
import runpy
import sys

path = sys.argv[1]
if importlib.util.find_spec("pytest") is not None:
    import pytest

    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", path]))
tests = {name: fn for name, fn in runpy.run_path(path).items() if name.startswith("test_") and callable(fn)}
if not tests:
    sys.exit(f"{path}: no test_ functions")
for name, fn in tests.items():
    fn()
    print(f"{name} passed (without pytest)")
