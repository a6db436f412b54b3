"""Render saved pytest-benchmark runs (docs/benchmarks/*.json) as tables.

Each saved run becomes a section stamped with the machine it ran on (CPU,
cores, system, Python), its date and the commit; then one row per benchmark:
its median time and every ratio it recorded against a baseline timed in the
same run (``ratio_<kind>_<what>`` in ``extra_info``, benchmarks/_timing.py),
with which way is better. Ratios carry over between machines; absolute times
do not. Regenerated on every build from the committed JSON, so the page
cannot drift from the numbers.

Save a run for the page with::

    python -m pytest benchmarks/test_x.py --benchmark-json=docs/benchmarks/test_x.json

(the per-round samples, ``stats.data``, may be dropped from the file: only
the statistics are shown).
"""
from __future__ import annotations

import json
import pathlib

BETTER = {"speedup": "higher", "time": "lower", "error": "lower", "memory": "lower"}


def _seconds(value: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def render(path: pathlib.Path) -> str:
    run = json.loads(path.read_text(encoding="utf-8"))
    machine = run.get("machine_info", {})
    cpu = machine.get("cpu", {})
    commit = run.get("commit_info", {})
    title = f"``{path.stem}``"
    out = [title, "-" * len(title), ""]
    stamp = [
        ("date", run.get("datetime", "?")),
        ("machine", f"{cpu.get('brand_raw', machine.get('processor', '?'))}, "
                    f"{cpu.get('count', '?')} logical cores, {machine.get('system', '?')} "
                    f"{machine.get('release', '')}"),
        ("Python", f"{machine.get('python_implementation', '')} "
                   f"{machine.get('python_version', '?')}"),
        ("commit", f"{str(commit.get('id', '?'))[:12]}"
                   f"{' (uncommitted changes)' if commit.get('dirty') else ''}"),
        ("pytest-benchmark", run.get("version", "?")),
    ]
    out += [f":{k}: {v}" for k, v in stamp] + [""]
    groups: dict[str, list[list[str]]] = {}
    for bench in run.get("benchmarks", []):
        name = bench.get("name", bench.get("fullname", "?"))
        suite = bench.get("fullname", "").split("::")[0].removeprefix("benchmarks/")
        stats = bench.get("stats") or {}
        median = stats.get("median")
        ratios = []
        for key, value in sorted((bench.get("extra_info") or {}).items()):
            parts = key.split("_", 2)
            if len(parts) == 3 and parts[0] == "ratio" and parts[1] in BETTER:
                ratios.append(f"{parts[1]} {parts[2]} = **{float(value):.3g}** "
                              f"({BETTER[parts[1]]} is better)")
        group = f"{bench.get('group') or name} ({suite})"
        groups.setdefault(group, []).append(
            [f"``{name}``", _seconds(median) if median else "untimed",
             str(stats.get("rounds", "-")), ratios])
    for group, rows in groups.items():
        out += [f".. list-table:: {group}", "   :header-rows: 1", "   :widths: 30 12 8 50", ""]
        for row in [["benchmark", "median", "rounds", ["ratios recorded"]], *rows]:
            out.append("   * - " + row[0])
            out += ["     - " + cell for cell in row[1:3]]
            # one ratio a line (a line block); none: an empty cell, not a bullet
            lines = row[3] or ["none on this row (the group's ratios sit on one row)"]
            out += ["     - | " + lines[0]] + ["       | " + line for line in lines[1:]]
        out.append("")
    return "\n".join(out) + "\n"


def generate(source: pathlib.Path, dest: pathlib.Path) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    runs = sorted(source.glob("*.json"))
    text = "".join(render(p) + "\n" for p in runs) or "No saved run yet.\n"
    target = dest / "runs.rst"
    if not target.exists() or target.read_text(encoding="utf-8") != text:
        target.write_text(text, encoding="utf-8")
    return [p.stem for p in runs]
