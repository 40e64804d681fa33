# SPDX-License-Identifier: Apache-2.0
"""Draws an ``afmesh bench --json`` report as a PNG.

Usage::

    python3 -m afmesh.plot bench.json -o bench.png

One line of panels per row of the report (a case in one polling mode):
afmesh's latency (p50, p99, max) beside the floor's, then what a push-pull
costs the cluster on each side: CPU time, system calls and context switches.
The report's schema is docs/bench-schema.json. A file that is not such a
report ends the program with status 2 and a one-line message.
"""

import argparse
import json
import os
import sys

SIDES = (("afmesh", "tab:blue"), ("floor", "tab:gray"))
# (title, [(label, field)...]): one panel each, the fields grouped on its x axis.
LATENCY = ("latency (us)", [("p50", "p50_us"), ("p99", "p99_us"), ("max", "max_us")])
COSTS = (
    ("CPU per push-pull (us)", [("user+sys", "cpu_us")]),
    ("syscalls per push-pull", [("syscalls", "syscalls")]),
    ("context switches per push-pull", [("voluntary", "voluntary_switches"), ("involuntary", "involuntary_switches")]),
)


class BadReport(Exception):
    """The file is not a bench report this module can draw."""


def _number(value, where):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadReport(f"{where} is not a number")
    return value


def _figures(obj, fields, where):
    """{field: number} for every field of `fields` in the object `obj`."""
    if not isinstance(obj, dict):
        raise BadReport(f"{where} is not an object")
    missing = [f for _, f in fields if f not in obj]
    if missing:
        raise BadReport(f"{where} lacks {', '.join(missing)}")
    return {f: _number(obj[f], f"{where}.{f}") for _, f in fields}


def _panels(row, index):
    """[(title, fields, {side: {field: value}})] for one row: latency first, then each cost."""
    where = f"rows[{index}]"
    sides = [side for side, _ in SIDES if side in row]
    cost = row.get("cost")
    if not isinstance(cost, dict):
        raise BadReport(f"{where}.cost is missing")
    title, fields = LATENCY
    panels = [(title, fields, {s: _figures(row[s], fields, f"{where}.{s}") for s in sides})]
    for title, fields in COSTS:
        panels.append((title, fields, {s: _figures(cost.get(s), fields, f"{where}.cost.{s}") for s in sides}))
    return panels


def load(path):
    """(title, [(row label, panels)...]) of the report at `path`; BadReport when it is none."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except OSError as e:
        raise BadReport(f"cannot read it: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadReport(f"not JSON: {e}") from None
    if not isinstance(report, dict) or not isinstance(report.get("rows"), list) or not report["rows"]:
        raise BadReport("no rows: not an `afmesh bench --json` report")
    rows = []
    for i, row in enumerate(report["rows"]):
        if not isinstance(row, dict) or not isinstance(row.get("case"), str) or "afmesh" not in row:
            raise BadReport(f"rows[{i}] is not a bench row")
        rows.append((f"{row['case']}, {row.get('poll', '?')} polling", _panels(row, i)))
    title = "afmesh {} bench: {} worker(s) x {} server(s), transport {}, device {}".format(
        *(report.get(k, "?") for k in ("afmesh_version", "workers", "servers", "transport", "device")))
    return title, rows


def _draw_panel(ax, title, fields, values):
    """Grouped bars: one group per field, one bar per side present."""
    present = [(side, color) for side, color in SIDES if side in values]
    width = 0.8 / len(present)
    for n, (side, color) in enumerate(present):
        xs = [i + (n - (len(present) - 1) / 2) * width for i in range(len(fields))]
        ax.bar(xs, [values[side][f] for _, f in fields], width, label=side, color=color)
    ax.set_xticks(range(len(fields)), [label for label, _ in fields])
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=8)


def draw(title, rows, output):
    """Writes the figure to `output` (PNG)."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt

    columns = 1 + len(COSTS)
    fig, axes = plt.subplots(len(rows), columns, figsize=(4 * columns, 2.8 * len(rows)), squeeze=False,
                             layout="constrained")
    for line, (label, panels) in zip(axes, rows):
        for ax, panel in zip(line, panels):
            _draw_panel(ax, *panel)
        line[0].set_ylabel(label, fontsize=9)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(title)
    fig.savefig(output, format="png", dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m afmesh.plot", description=__doc__.split("\n\n")[0])
    parser.add_argument("report", help="what `afmesh bench --json FILE` wrote")
    parser.add_argument("-o", "--output", help="the PNG to write (default: the report's name with .png)")
    args = parser.parse_args(argv)
    output = args.output or os.path.splitext(args.report)[0] + ".png"
    try:
        title, rows = load(args.report)
    except BadReport as e:
        print(f"afmesh.plot: {args.report}: {e}", file=sys.stderr)
        return 2
    try:
        draw(title, rows, output)
    except OSError as e:
        print(f"afmesh.plot: cannot write {output}: {e.strerror or e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
