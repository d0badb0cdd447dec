"""The ``rltrain`` command of the Python package: runs the native CLI (tools/rltrain.c) that the wheel bundles as
``rltrain/bin/rltrain`` beside the library, so ``pip install ./bindings/python`` gives the same ``rltrain --config``
and ``rltrain plan`` as a CMake build. A package installed without the bundled build (RLTRAIN_LIBRARY pointing at
a build tree) runs the ``rltrain`` next to that library instead."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def native_cli() -> Path | None:
    """The native rltrain binary: the bundled one, else the one beside the loaded library; None when neither."""
    here = Path(__file__).resolve().parent / "bin" / "rltrain"
    if here.is_file() and os.access(here, os.X_OK):
        return here
    from . import _native

    beside = Path(_native.LIBRARY_PATH).resolve().parent / "rltrain" if _native.LIBRARY_PATH else None
    return beside if beside is not None and beside.is_file() and os.access(beside, os.X_OK) else None


def main(argv: list[str] | None = None) -> int:
    cli = native_cli()
    if cli is None:
        print("rltrain: the native CLI is not in this installation (a package built with RLTRAIN_PYTHON_BUNDLE=OFF); "
              "build it with CMake (cmake --build build: build/rltrain) or pip install ./bindings/python",
              file=sys.stderr)
        return 1
    args = [str(cli), *(sys.argv[1:] if argv is None else argv)]
    os.execv(args[0], args)  # the process becomes the CLI: its exit code, its signals (Ctrl-C: exit 5)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
