#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds a wheel of the afmesh package that carries the library and its modules.

    build_wheel.py --library LIB [--module MODULE ...] --stage DIR --out OUT

`cmake --build <build> --target python_wheel` runs it with that build's
library and modules. The wheel's package is laid out as

    afmesh/*.py
    afmesh/libafmesh.so.0           the library under its soname, the first name _loader.py tries beside the package
    afmesh/afmesh/libafmesh_*.so    the modules, where the library looks beside itself (<its dir>/afmesh)

so that, installed with pip where nothing else of afmesh is, `import afmesh`
finds both with no environment. The package, library and modules are copied
into DIR/src (DIR is emptied first, so nothing of an earlier build slips in)
and pip builds the wheel from there offline, with the setuptools already
installed; it is moved to OUT and its path printed.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
LIBRARY_NAME = "libafmesh.so.0"


def stage(directory, library, modules):
    """Lays out the package source, library and modules in `directory` for pip to build from."""
    package = os.path.join(directory, "afmesh")
    os.makedirs(os.path.join(package, "afmesh"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(os.path.join(HERE, name), directory)
    for source in glob.glob(os.path.join(HERE, "afmesh", "*.py")):
        shutil.copy(source, package)
    shutil.copy(library, os.path.join(package, LIBRARY_NAME))  # follows the symlink to the file itself
    for module in modules:
        shutil.copy(module, os.path.join(package, "afmesh"))
    # Machine code inside makes it a platform wheel. The tag is py3-none-<platform>:
    # ctypes uses no CPython ABI, so any Python 3 on this platform can load it.
    with open(os.path.join(directory, "setup.cfg"), "w") as f:
        f.write(f"[bdist_wheel]\nplat_name = {sysconfig.get_platform()}\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--library", required=True, help="libafmesh.so to bundle (any of its names)")
    parser.add_argument("--module", action="append", default=[], help="a module to bundle (repeatable)")
    parser.add_argument("--stage", required=True, help="scratch directory for the package to build from")
    parser.add_argument("--out", required=True, help="where the wheel goes")
    args = parser.parse_args()
    shutil.rmtree(args.stage, ignore_errors=True)
    source, built = os.path.join(args.stage, "src"), os.path.join(args.stage, "dist")
    stage(source, args.library, args.module)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index",
                    "--quiet", "--wheel-dir", built, source], check=True)
    (wheel,) = os.listdir(built)
    os.makedirs(args.out, exist_ok=True)
    print(shutil.move(os.path.join(built, wheel), os.path.join(args.out, wheel)))


if __name__ == "__main__":
    main()
