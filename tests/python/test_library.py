# SPDX-License-Identifier: Apache-2.0
"""How the package finds libafmesh.so, and the package's own version.

Each lookup is tried in a fresh interpreter (subprocess) with a controlled
environment, since a process loads the library once.
"""

import os
import shutil
import subprocess
import sys

import afmesh

PACKAGE = os.path.dirname(afmesh.__file__)
LIBRARY = afmesh.library_path()


def import_in_child(pythonpath, **env):
    """Runs `import afmesh` in a child; returns (exit code, what it printed: the library path or the error)."""
    child_env = {k: v for k, v in os.environ.items() if k not in ("AFMESH_LIBRARY", "LD_LIBRARY_PATH")}
    child_env.update(PYTHONPATH=pythonpath, PYTHONDONTWRITEBYTECODE="1", **env)
    done = subprocess.run([sys.executable, "-c", "import afmesh; print(afmesh.library_path())"], env=child_env,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, (done.stdout + done.stderr).strip()


def copy_package(where):
    shutil.copytree(PACKAGE, os.path.join(where, "afmesh"), ignore=shutil.ignore_patterns("__pycache__", "_paths.py"))
    return os.path.join(where, "afmesh")


def test_the_package_and_library_versions_agree():
    assert afmesh.version() == afmesh.__version__


def test_AFMESH_LIBRARY_is_used():
    assert LIBRARY == os.path.realpath(os.environ["AFMESH_LIBRARY"])


def test_a_wrong_AFMESH_LIBRARY_is_an_error_naming_it(tmp_path):
    code, said = import_in_child(os.path.dirname(PACKAGE), AFMESH_LIBRARY=str(tmp_path / "nothing.so"))
    assert code != 0 and "AFMESH_LIBRARY=" in said and "nothing.so" in said


def test_a_library_beside_the_package_is_found(tmp_path):
    package = copy_package(tmp_path)
    shutil.copy(LIBRARY, os.path.join(package, "libafmesh.so"))
    assert import_in_child(str(tmp_path)) == (0, os.path.join(package, "libafmesh.so"))


def test_the_install_tree_is_found_through_paths_py(tmp_path):
    package = copy_package(tmp_path / "site")
    libdir = tmp_path / "lib"
    libdir.mkdir()
    shutil.copy(LIBRARY, libdir / "libafmesh.so")
    with open(os.path.join(package, "_paths.py"), "w") as f:
        f.write(f"LIBRARY_DIR_FROM_PACKAGE = {os.path.relpath(libdir, package)!r}\n")
    assert import_in_child(str(tmp_path / "site")) == (0, str(libdir / "libafmesh.so"))


def test_the_linker_search_path_is_the_last_resort(tmp_path):
    copy_package(tmp_path)
    code, said = import_in_child(str(tmp_path), LD_LIBRARY_PATH=os.path.dirname(LIBRARY))
    assert (code, said) == (0, LIBRARY)


def test_nowhere_to_be_found_says_what_to_do(tmp_path):
    copy_package(tmp_path)
    code, said = import_in_child(str(tmp_path))
    if code == 0:  # a libafmesh.so is installed system-wide: then finding it is right
        assert said.endswith((".so", ".so.0")) or ".so." in said
    else:
        assert "cannot find libafmesh.so: set AFMESH_LIBRARY" in said
