# SPDX-License-Identifier: Apache-2.0
"""Installing: `cmake --install` puts the package where one `import afmesh` finds it and the library, and
`pip install` builds the package offline. Needs the build tree (ctest passes AF_TEST_BUILD_DIR and AF_TEST_CMAKE).
"""

import glob
import os
import shutil
import subprocess
import sys

import pytest

import afmesh

BUILD_DIR, CMAKE = os.environ.get("AF_TEST_BUILD_DIR"), os.environ.get("AF_TEST_CMAKE")
SOURCE = os.path.dirname(os.path.dirname(afmesh.__file__))  # bindings/python


def run(argv, **env):
    child_env = {k: v for k, v in os.environ.items() if k not in ("AFMESH_LIBRARY", "PYTHONPATH")}
    child_env.update(PYTHONDONTWRITEBYTECODE="1", **env)
    done = subprocess.run(argv, env=child_env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout.strip()


@pytest.mark.skipif(not (BUILD_DIR and CMAKE), reason="needs AF_TEST_BUILD_DIR and AF_TEST_CMAKE (run through ctest)")
def test_cmake_install_puts_package_and_library_together(tmp_path):
    prefix = tmp_path / "prefix"
    run([CMAKE, "--install", BUILD_DIR, "--prefix", str(prefix)])
    (init,) = glob.glob(str(prefix / "**" / "afmesh" / "__init__.py"), recursive=True)
    site = os.path.dirname(os.path.dirname(init))
    assert os.path.exists(os.path.join(site, "afmesh", "_paths.py"))
    loaded = run([sys.executable, "-c", "import afmesh; print(afmesh.library_path())"], PYTHONPATH=site)
    assert loaded.startswith(str(prefix)) and os.path.basename(loaded).startswith("libafmesh.so")


def test_pip_builds_the_package_offline(tmp_path):
    source = tmp_path / "source"  # setuptools writes build/ and egg-info beside its input: not in the checkout
    shutil.copytree(SOURCE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    target = tmp_path / "target"
    run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", "--quiet",
         "--target", str(target), str(source)])
    version = run([sys.executable, "-c", "import afmesh; print(afmesh.__version__, afmesh.version())"],
                  PYTHONPATH=str(target), AFMESH_LIBRARY=afmesh.library_path())
    assert version == f"{afmesh.__version__} {afmesh.__version__}"
    assert os.path.exists(target / "afmesh" / "fserver.py")
