#!/usr/bin/python3
"""Plots of the committed benchmark tables (Debian: python3-matplotlib), PNG beside each table.

    scripts/plot-results.py            # every table this script knows, under benchmarks/results/

host-default-flags.txt: the TARGETS.md rows, peer vs h2expr before vs now (log scale, seconds).
host-cholesky.txt: cholesky(S) against Eigen's simplicial factorization per grid.
"""
import pathlib
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RESULTS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "results"


def table_rows(text, first_cell):
    """Cells of the markdown rows whose first cell starts with first_cell."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0].startswith(first_cell):
            rows.append(cells)
    return rows


def numbers(cell):
    return [float(x) for x in re.findall(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", cell)]


def plot_default_flags():
    text = (RESULTS / "host-default-flags.txt").read_text().split("\n## ")[0]  # the summary table only
    labels, series = [], {"peer (H2Opus CPU)": [], "h2expr before": [], "h2expr now": []}
    for cells in table_rows(text, "2D") + table_rows(text, "3D") + table_rows(text, "sparse"):
        name = cells[0]
        peer, before, now = numbers(cells[1]), numbers(cells[2]), numbers(cells[3])
        if name.startswith("sparse"):  # no peer figure: that column repeats Eigen's, the "before" ones
            peer = [float("nan")] * len(now)
        parts = ["1 v", "16 v", "64 v"] if "HGEMV" in name else ["40^3", "64^3"] if name.startswith("sparse") else [""]
        for i, part in enumerate(parts):
            labels.append((name.split(",")[0].split("(")[0].strip() + " " + part).strip())
            series["peer (H2Opus CPU)"].append(peer[i] if i < len(peer) else float("nan"))
            series["h2expr before"].append(before[i] if i < len(before) else float("nan"))
            series["h2expr now"].append(now[i] if i < len(now) else float("nan"))
    fig, ax = plt.subplots(figsize=(11, 4.5))
    width = 0.27
    for k, (name, values) in enumerate(series.items()):
        ax.bar([i + (k - 1) * width for i in range(len(labels))], values, width, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("seconds (log scale)")
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax.set_title("TARGETS.md problems, package default flags, 2-core Intel Xeon (AVX-512)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "host-default-flags.png", dpi=110)


def plot_cholesky():
    text = (RESULTS / "host-cholesky.txt").read_text()
    grids, ours, eigen = [], [], []
    for cells in table_rows(text, ""):
        if not re.match(r"\d+\^3", cells[0]):
            continue
        grids.append(cells[0])
        ours.append(float(cells[4]))
        eigen.append(float(cells[8]))
    fig, ax = plt.subplots(figsize=(6, 4))
    x = range(len(grids))
    ax.bar([i - 0.2 for i in x], eigen, 0.4, label="Eigen simplicial LLT")
    ax.bar([i + 0.2 for i in x], ours, 0.4, label="cholesky(S): CHOLMOD supernodal")
    ax.set_yscale("log")
    ax.set_ylabel("factorization, seconds (log scale)")
    ax.set_xticks(list(x))
    ax.set_xticklabels([g + " 3D Poisson" for g in grids])
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(RESULTS / "host-cholesky.png", dpi=110)


if __name__ == "__main__":
    plot_default_flags()
    plot_cholesky()
