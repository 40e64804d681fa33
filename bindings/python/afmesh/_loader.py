# SPDX-License-Identifier: Apache-2.0
"""Finds and loads libafmesh.so.

Search order, first hit wins:

1. ``AFMESH_LIBRARY``: an explicit path. If it is set and fails to load, that
   is an error: silently falling back to another copy would hide the mistake.
2. The library beside the package: where a wheel from ``build_wheel.py``
   carries it, with its modules in ``afmesh/`` next to it.
3. The installed library, found through ``_paths.py``, which ``cmake
   --install`` writes next to this file with the library directory relative
   to the package, so the installed tree can be moved as a whole.
4. The dynamic linker's own search (``LD_LIBRARY_PATH``, rpath, ld.so.cache),
   via ``ctypes.util.find_library`` and then plain ``dlopen``.

Everywhere the soname ``libafmesh.so.0`` comes first: every install and
wheel has it, while ``libafmesh.so`` is a development symlink that a
runtime-only install (a distribution's non -dev package) lacks.
"""

import ctypes
import ctypes.util
import os

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
_NAMES = ("libafmesh.so.0", "libafmesh.so")


def _installed_dir():
    """The library directory recorded at install time, or None outside an install."""
    try:
        from . import _paths
    except ImportError:
        return None
    return os.path.normpath(os.path.join(_PACKAGE_DIR, _paths.LIBRARY_DIR_FROM_PACKAGE))


def _candidates():
    """Yields (path or name, how it was found) in search order."""
    for name in _NAMES:
        yield os.path.join(_PACKAGE_DIR, name), "beside the package"
    installed = _installed_dir()
    if installed:
        for name in _NAMES:
            yield os.path.join(installed, name), "the install tree (_paths.py)"
    found = ctypes.util.find_library("afmesh")
    if found:
        yield found, "ctypes.util.find_library"
    for name in _NAMES:
        yield name, "the dynamic linker's search path"


def load():
    """Returns the loaded library as a ctypes.CDLL; raises ImportError saying where it looked."""
    explicit = os.environ.get("AFMESH_LIBRARY")
    if explicit:
        try:
            return ctypes.CDLL(explicit)
        except OSError as e:
            raise ImportError(f"AFMESH_LIBRARY={explicit} cannot be loaded: {e}") from e
    tried = []
    for path, how in _candidates():
        if os.path.isabs(path) and not os.path.exists(path):
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({how}): {e}")
    detail = "; ".join(tried) if tried else "no candidate exists"
    raise ImportError(
        "cannot find libafmesh.so: set AFMESH_LIBRARY to its path, install afmesh with "
        f"`cmake --install`, or add its directory to LD_LIBRARY_PATH (tried: {detail})"
    )


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def path_of(lib):
    """The file `lib` was really loaded from (dladdr on one of its symbols), whatever name found it."""
    info = _DlInfo()
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if not dladdr(ctypes.cast(lib.afmesh_version, ctypes.c_void_p), ctypes.byref(info)) or not info.dli_fname:
        return lib._name
    return os.path.realpath(info.dli_fname.decode())
