# SPDX-License-Identifier: Apache-2.0
"""`afmesh bench --json/--csv` on a real 1 x 1 run, and `python3 -m afmesh.plot` on what it wrote.

Checks the files' form and that the cost counters were gathered, never how
fast anything ran. Needs the build tree (ctest passes AF_TEST_BUILD_DIR).
"""

import csv
import json
import os
import subprocess
import sys

import jsonschema
import pytest

from conftest import DEADLINE_S, free_address

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "..", "..", "docs", "bench-schema.json")
BUILD_DIR = os.environ.get("AF_TEST_BUILD_DIR")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.skipif(not BUILD_DIR, reason="needs AF_TEST_BUILD_DIR (run through ctest)")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """(JSON document, CSV lines as dicts, JSON path) of one small bench run."""
    out = tmp_path_factory.mktemp("bench")
    json_path, csv_path = out / "bench.json", out / "bench.csv"
    afmesh = os.path.join(BUILD_DIR, "bin", "afmesh")
    argv = [afmesh, "run", "--workers", "1", "--servers", "1", "--scheduler", free_address(), "--timeout",
            str(DEADLINE_S), "--", afmesh, "bench", "--iters", "50", "--warmup", "10", "--sizes", "8", "--poll",
            "adaptive", "--json", str(json_path), "--csv", str(csv_path)]
    run = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=DEADLINE_S + 30)
    assert run.returncode == 0, run.stdout
    with open(json_path, encoding="utf-8") as f:
        document = json.load(f)
    with open(csv_path, newline="", encoding="utf-8") as f:
        lines = list(csv.DictReader(f))
    return document, lines, json_path


def flatten(value, name=""):
    """{dotted name: scalar} as the CSV names a JSON value's fields."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = ((str(i), v) for i, v in enumerate(value))
    else:
        return {name: value}
    flat = {}
    for key, item in items:
        flat.update(flatten(item, f"{name}.{key}" if name else key))
    return flat


def test_json_follows_the_schema(report):
    document, _, _ = report
    with open(SCHEMA, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(document)
    assert [r["kind"] for r in document["rows"]] == ["size", "af_shape", "af_pipeline"]
    assert {r["poll"] for r in document["rows"]} == {"adaptive"}
    assert (document["workers"], document["servers"], document["iterations"]) == (1, 1, 50)


def test_csv_holds_the_same_rows(report):
    document, lines, _ = report
    run = {k: v for k, v in document.items() if k != "rows"}
    assert len(lines) == len(document["rows"])
    for line, row in zip(lines, document["rows"]):
        expected = flatten({**run, **row})
        assert set(expected) <= set(line), "CSV columns missing"
        for name, cell in line.items():
            value = expected.get(name)
            if value is None:
                assert cell == "", name
            elif isinstance(value, str):
                assert cell == value, name
            elif isinstance(value, bool):
                assert cell == str(value).lower(), name
            else:
                assert float(cell) == value, name


def test_cost_was_gathered_for_both_sides(report):
    document, _, _ = report
    for row in document["rows"]:
        sides = ["afmesh"] + (["floor"] if row["kind"] != "af_pipeline" else [])
        for side in sides:
            cost = row["cost"][side]
            where = f"{row['case']}: {side}"
            assert cost["push_pulls"] > 0, where
            assert cost["cpu_us"] > 0, where
            assert cost["syscalls"] > 0, where
            assert cost["operations"] > 0, where
        if row["kind"] != "af_pipeline":
            assert row["ratio"]["cpu"] is not None and row["ratio"]["cpu"] > 0


def plot(*args):
    return subprocess.run([sys.executable, "-m", "afmesh.plot", *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=DEADLINE_S)


def test_plot_draws_a_png(report, tmp_path):
    _, _, json_path = report
    png = tmp_path / "bench.png"
    done = plot(str(json_path), "-o", str(png))
    assert done.returncode == 0, done.stderr
    data = png.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > len(PNG_SIGNATURE)


@pytest.mark.parametrize("content", ["{", "[]", '{"rows": [{"case": "8 B", "afmesh": {}}]}'])
def test_plot_refuses_a_bad_file_plainly(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    done = plot(str(bad), "-o", str(tmp_path / "bad.png"))
    assert done.returncode == 2
    assert done.stderr.startswith("afmesh.plot: ") and "Traceback" not in done.stderr
    assert not (tmp_path / "bad.png").exists()
