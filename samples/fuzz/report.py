"""Summarise a fuzzing run (``fuzz.py`` -> ``check_cases.py --prepare`` -> ``referee.py`` ->
``check_cases.py --results``) as Markdown: cases, seeds Keras refused, agreements per check, the two
Keras backends' disagreements by layer class and config, convert and export outcomes, and every
failure with its seed. No Keras needed::

    python samples/fuzz/report.py --results R.jsonl [--results ...] DIR [DIR...] > docs/fuzz-report.md
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path

CHECKS = ("load", "depths", "layer_order", "params", "outputs", "validate", "convert", "export")
# Config keys that tell two disagreeing layers of one class apart (the rest is noise here).
KEY_CONFIG = ("data_format", "kernel_size", "strides", "dilation_rate", "padding", "groups", "depth_multiplier",
              "pool_size", "axis", "merge_mode", "return_state")  # fmt: skip


def _check_of(cls: str) -> str:
    return {"run": "outputs", "nested": "layer_order"}.get(cls, cls)


def _signature(first: dict | None) -> tuple[str, str]:
    if not first or "class" not in first:
        return ("(not localised)", "")
    cfg = first.get("config") or {}
    keys = {k: cfg[k] for k in KEY_CONFIG if k in cfg}
    return (first["class"], json.dumps(keys, separators=(",", ":")))


def _convert_pinned(convert: dict) -> bool:
    return "keras3" in convert or convert.get("written") is False


def collect(dirs: list[Path], results: list[Path]) -> dict:
    cases = {}
    refused: Counter[str] = Counter()
    for root in dirs:
        for case in sorted(root.iterdir()):
            if (case / "case.json").is_file():
                cases[str(case)] = json.loads((case / "case.json").read_text(encoding="utf-8"))
        log = root / "refused.jsonl"
        if log.is_file():
            for line in log.read_text(encoding="utf-8").splitlines():
                refused[f"{root.name}: {json.loads(line)['error'][:70]}"] += 1
    checked = {}
    for path in results:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            checked[row["case"]] = row["failures"]
    return {"cases": cases, "refused": refused, "checked": checked}


def render(data: dict) -> str:
    cases, checked = data["cases"], data["checked"]
    by_flavour = Counter(g["flavour"] for g in cases.values())
    out = ["# Fuzzer report", ""]
    out.append(
        "Made by `samples/fuzz/report.py` from one run of the differential fuzzer (`samples/fuzz/`): random "
        "functional models built and saved by real Keras 3 (on TensorFlow) and tf_keras, run again by Keras 3 "
        "on JAX (`referee.py`), then checked with modelgraph alone (`check_cases.py`)."
    )
    out.append("")
    seeds = defaultdict(list)
    for g in cases.values():
        seeds[g["flavour"]].append(g["seed"])
    for fl, n in sorted(by_flavour.items()):
        s = seeds[fl]
        out.append(f"- {fl}: {n} cases (seeds {min(s)}..{max(s)})")
    out.append(f"- seeds whose model Keras itself refused to build, run or save: {sum(data['refused'].values())}")
    out.append("")
    # checks
    out += ["## Agreement per check", "", "| check | cases checked | agree | fail |", "|---|---:|---:|---:|"]
    failed_by_check: dict[str, list[str]] = defaultdict(list)
    for case, failures in checked.items():
        for check in sorted({_check_of(cls) for _, cls, _ in failures}):
            failed_by_check[check].append(case)
    for check in CHECKS:
        n = len(checked)
        if check == "convert":  # pinned only where Keras 3 gave a verdict, or modelgraph refused
            n = sum(1 for c in checked if _convert_pinned(cases.get(c, {}).get("convert") or {}))
        bad = len(failed_by_check.get(check, []))
        out.append(f"| {check} | {n} | {n - bad} | {bad} |")
    ok = sum(1 for f in checked.values() if not f)
    out += ["", f"{ok} of {len(checked)} checked cases pass every check.", ""]
    # referee
    out += ["## The two Keras backends", ""]
    status = Counter((g["flavour"], (g.get("referee") or {}).get("jax", {}).get("status", "not run")) for g in cases.values())
    out += ["| flavour | JAX agrees with the file's TensorFlow outputs | differs | Keras 3 refused the file "
            "| not refereed (checked against TensorFlow only) |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    for fl in sorted(by_flavour):
        out.append(
            f"| {fl} | {status[(fl, 'agrees')]} | {status[(fl, 'differs')]} | {status[(fl, 'refused')]} "
            f"| {status[(fl, 'not run')]} |"
        )
    out.append("")
    groups: dict[tuple, list] = defaultdict(list)
    for g in cases.values():
        r = g.get("referee") or {}
        if r.get("jax", {}).get("status") == "differs":
            groups[(g["flavour"], *_signature(r.get("first_difference")), r.get("follows"), r.get("reason", ""))].append(g)
    if groups:
        out += [
            "Every disagreement, grouped by the first layer whose outputs part (class and the config keys "
            "that matter) and which outputs the case then follows:",
            "",
            "| flavour | first layer that differs | config | cases | largest gap | seeds | follows | why |",
            "|---|---|---|---:|---:|---|---|---|",
        ]
        for key, gs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            fl, cls, cfg, follows, reason = key
            gap = max(g["referee"]["jax"]["max_err"] for g in gs)
            seed_list = ", ".join(str(g["seed"]) for g in sorted(gs, key=lambda g: g["seed"])[:6])
            reason = reason.split(" (")[0]
            out.append(f"| {fl} | {cls} | `{cfg}` | {len(gs)} | {gap:.3g} | {seed_list} | {follows} | {reason} |")
        out.append("")
    jax_refused = Counter(
        (g.get("referee") or {}).get("jax", {}).get("error", "")[:90]
        for g in cases.values()
        if (g.get("referee") or {}).get("jax", {}).get("status") == "refused"
    )
    if jax_refused:
        out += ["Files Keras 3 (JAX) could not load or run (no second referee for these):", ""]
        out += [f"- {n} x `{e}`" for e, n in jax_refused.most_common(8)]
        out.append("")
    # convert
    conv = [g.get("convert") or {} for g in cases.values()]
    out += ["## convert", ""]
    written = [c for c in conv if c.get("written")]
    verdict = Counter(c.get("keras3", "not loaded") for c in written)
    seen = verdict["pass"] + verdict["fail"] + verdict["refused"]
    out.append(
        f"modelgraph wrote a Keras 3 `.keras` file for {len(written)} of {sum(1 for c in conv if 'written' in c)} "
        f"cases. Of the {seen} written files real Keras 3 (safe mode, JAX) was given, it loaded and reproduced "
        f"the followed outputs for {verdict['pass']}, gave other outputs for {verdict['fail']} and refused "
        f"{verdict['refused']}."
    )
    reasons = Counter(re.sub(r"cannot write \S+: ", "", c["refused"])[:130] for c in conv if c.get("written") is False)
    if reasons:
        out += ["", "Refused by modelgraph (nothing written):", ""]
        out += [f"- {n} x `{r}`" for r, n in reasons.most_common(10)]
    out.append("")
    # failures
    out += ["## Failures by check, with seeds", ""]
    if not failed_by_check:
        out.append("None.")
    for check in CHECKS:
        names = failed_by_check.get(check)
        if not names:
            continue
        details = Counter()
        for c in names:
            for _, cls, detail in checked[c]:
                if _check_of(cls) == check:
                    details[detail.split(" max |err|")[0][:100]] += 1
                    break
        seed_list = ", ".join(Path(c).name for c in sorted(names)[:12])
        out.append(f"- **{check}** ({len(names)}): {seed_list}")
        out += [f"  - {n} x `{d}`" for d, n in details.most_common(5)]
    out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--results", action="append", type=Path, default=[])
    args = ap.parse_args(argv)
    sys.stdout.write(render(collect(args.dirs, args.results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
