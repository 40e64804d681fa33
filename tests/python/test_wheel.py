# SPDX-License-Identifier: Apache-2.0
"""The wheel: build_wheel.py (what `cmake --build <dir> --target python_wheel` runs) puts this build's library and
modules inside the package; pip installs that one file into a fresh venv, where `import afmesh` and a 1 x 1 cluster
of the venv's Python processes work with nothing of the build or the checkout on any search path.

Builds the wheel from the library and modules ctest points at (AFMESH_LIBRARY, AFMESH_MODULE_PATH).
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

import afmesh
from conftest import free_address

LIBRARY, MODULE_DIR = os.environ.get("AFMESH_LIBRARY"), os.environ.get("AFMESH_MODULE_PATH")
BINDINGS = os.path.dirname(os.path.dirname(os.path.abspath(afmesh.__file__)))  # bindings/python
PIPELINE = os.path.join(os.path.dirname(os.path.dirname(BINDINGS)), "examples", "python", "af_pipeline.py")

pytestmark = pytest.mark.skipif(not (LIBRARY and MODULE_DIR),
                                reason="needs a build's AFMESH_LIBRARY and AFMESH_MODULE_PATH (run through ctest)")


def clean_env(**settings):
    """This environment less everything that could lead to the build or the checkout: AFMESH_* (the library and
    module paths among them), DMLC_*, PYTHONPATH and LD_LIBRARY_PATH; plus `settings`."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AFMESH_", "DMLC_")) and k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update({k: str(v) for k, v in settings.items()})
    return env


def run(argv, cwd):
    done = subprocess.run(argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout.strip()


class Installed:
    """The wheel, and the venv it is installed in."""

    def __init__(self, root):
        self.root = root
        self.modules = sorted(glob.glob(os.path.join(MODULE_DIR, "libafmesh_*.so")))
        self.wheel = run([sys.executable, os.path.join(BINDINGS, "build_wheel.py"), "--library", LIBRARY,
                          *(arg for m in self.modules for arg in ("--module", m)),
                          "--stage", str(root / "stage"), "--out", str(root / "dist")], cwd=root).splitlines()[-1]
        venv = root / "venv"
        run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], cwd=root)
        self.python = str(venv / "bin" / "python")
        run([self.python, "-m", "pip", "install", "--no-index", "--no-deps", "--quiet", self.wheel], cwd=root)
        # Where the library reports itself from: real paths.
        self.package = os.path.join(
            os.path.realpath(run([self.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 cwd=root)), "afmesh")
        assert self.package.startswith(os.path.realpath(venv) + os.sep)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    return Installed(tmp_path_factory.mktemp("wheel"))


def test_the_wheel_is_for_this_platform_and_carries_library_and_modules(installed):
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert os.path.basename(installed.wheel) == f"afmesh-{afmesh.__version__}-py3-none-{platform}.whl"
    assert installed.modules, f"no modules in {MODULE_DIR}"
    with zipfile.ZipFile(installed.wheel) as wheel:
        carried = {n for n in wheel.namelist() if ".so" in n}
    assert carried == {"afmesh/libafmesh.so.0", *(f"afmesh/afmesh/{os.path.basename(m)}" for m in installed.modules)}


def test_import_loads_the_library_inside_the_package(installed):
    out = run([installed.python, "-c", "import afmesh; print(afmesh.__file__); print(afmesh.library_path()); "
               "print(afmesh.version())"], cwd=installed.root)
    package, library, version = out.splitlines()
    assert os.path.realpath(package) == os.path.join(installed.package, "__init__.py")
    assert library == os.path.join(installed.package, "libafmesh.so.0")
    assert version == afmesh.__version__


def test_a_cluster_runs_from_the_venv_alone(installed, processes, tmp_path, monkeypatch):
    # The nodes start here (`python -c` puts the working directory on sys.path), with the
    # example copied here too, so that no directory of the checkout is on their sys.path.
    monkeypatch.chdir(tmp_path)
    pipeline = shutil.copy(PIPELINE, tmp_path)
    # info: each node logs the path of the device and transport modules it selects.
    common = dict(AFMESH_SCHEDULER=free_address(), AFMESH_NUM_WORKERS=1, AFMESH_NUM_SERVERS=1, AFMESH_LOG_LEVEL="info")
    processes.start("scheduler", [installed.python, "-c", "import afmesh; afmesh.Scheduler().close()"],
                    clean_env(AFMESH_ROLE="scheduler", **common))
    for role in ("server", "worker"):
        processes.start(role, [installed.python, pipeline, "--backend", "numpy"],
                        clean_env(AFMESH_ROLE=role, AFMESH_RANK=0, **common))
    results = processes.wait_all()
    assert all(code == 0 for code, _ in results.values()), "\n".join(
        f"---- {name} exited {code}\n{out}" for name, (code, out) in results.items())

    worker, server = results["worker"][1], results["server"][1]
    assert "worker 0: 4 layers x 3 micro-batches over 1 servers match the single-process model (numpy" in worker
    assert "server 0: 12 batches from 1 workers" in server
    for name, out in (("worker", worker), ("server", server)):
        selected = dict(re.findall(r"(device|transport) module '\w+' selected \((.+)\)", out))
        assert selected.keys() == {"device", "transport"}, f"{name} did not log its modules:\n{out}"
        for path in selected.values():
            assert os.path.dirname(path) == os.path.join(installed.package, "afmesh"), f"{name}: {path}"
