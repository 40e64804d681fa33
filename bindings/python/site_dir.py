# SPDX-License-Identifier: Apache-2.0
"""Prints where a package belongs under an install prefix, relative to it (used by CMake).

The interpreter's own site directory under that prefix if it has one (so the
installed package is importable without PYTHONPATH), else the standard
lib/pythonX.Y/site-packages layout.
"""

import os
import site
import sys
import sysconfig

prefix = os.path.abspath(sys.argv[1])
inside = [os.path.relpath(p, prefix) for p in site.getsitepackages()
          if os.path.commonpath([os.path.abspath(p), prefix]) == prefix]
if inside:
    print(min(inside, key=lambda p: p.count(os.sep)))
else:
    scheme = sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
    print(os.path.relpath(scheme, prefix))
