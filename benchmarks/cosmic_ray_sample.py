"""A generic mutation tool's view of the catalogue: cosmic-ray over uet/pds and uet/ses.

The hand-written mutants of ``benchmarks/conformance_mutants.py`` are protocol bugs; this
is the blind complement: cosmic-ray's operators (comparison, arithmetic, boolean, number
replacements) at every place they apply in ``uet/pds`` and ``uet/ses`` (about 13,000
mutations, some 11 hours of catalogue runs on one core), of which a seeded random sample is
run with the catalogue as the test command. Survivors are then sorted:

* **annotation**: the mutation is inside a type annotation (``int | None`` to ``int ^
  None``); the modules use postponed annotations, so nothing runs it: equivalent;
* **not reached**: the catalogue never executes that line (coverage of one catalogue run):
  code the catalogue cannot judge (the SES initiator API, invariant checks, limits of other
  configurations...);
* **reached**: executed and still not caught: what the catalogue could check better, or an
  equivalent mutant (a counter, a log text, a bound no case reaches).

Needs ``pip install cosmic-ray coverage`` (neither is a dependency of uet). Work happens in a
copy of the package (cosmic-ray edits the files it mutates). Usage::

    python benchmarks/cosmic_ray_sample.py --sample 300 --seed 22 --workdir /tmp/cr
    python benchmarks/cosmic_ray_sample.py --workdir /tmp/cr --report   # classify only
    python benchmarks/cosmic_ray_sample.py --workdir /tmp/cr --replay   # survivors, today
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """[cosmic-ray]
module-path = {modules}
timeout = 120.0
excluded-modules = []
test-command = "{python} -m uet.cli conformance -x"

[cosmic-ray.distributor]
name = "local"
"""


def _run(cmd: list[str], work: Path, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1")
    return subprocess.run(cmd, cwd=work, env=env, check=True, **kw)


def prepare(work: Path, modules: list[str], sample: int, seed: int) -> None:
    """Copy the package, write the config, create the session and keep ``sample`` jobs."""
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    shutil.copytree(ROOT / "uet", work / "uet",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (work / "cr.toml").write_text(CONFIG.format(modules=json.dumps(modules),
                                                python=sys.executable))
    _run([sys.executable, "-m", "cosmic_ray.cli", "init", "cr.toml", "session.sqlite"], work)
    db = sqlite3.connect(work / "session.sqlite")
    ids = sorted(r[0] for r in db.execute("select job_id from work_items"))
    keep = set(random.Random(seed).sample(ids, min(sample, len(ids))))
    drop = [(i,) for i in ids if i not in keep]
    db.executemany("delete from mutation_specs where job_id = ?", drop)
    db.executemany("delete from work_items where job_id = ?", drop)
    db.commit()
    (work / "total.txt").write_text(str(len(ids)))


def coverage_of_catalogue(work: Path, modules: list[str]) -> dict[str, set[int]]:
    """Lines of ``modules`` one in-process catalogue run executes (unmutated copy)."""
    _run([sys.executable, "-m", "coverage", "run", "--data-file=cov.data",
          f"--source={','.join(modules)}", "-m", "uet.cli", "conformance"], work,
         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _run([sys.executable, "-m", "coverage", "json", "--data-file=cov.data", "-o",
          "cov.json", "-q"], work)
    data = json.loads((work / "cov.json").read_text())["files"]
    return {os.path.relpath(os.path.join(work, f), work): set(v["executed_lines"])
            for f, v in data.items()}


def annotation_spans(source: str) -> list[tuple[int, int, int, int]]:
    """(start line, start col, end line, end col) of every annotation in ``source``."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        anns = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            anns += [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs,
                                            a.vararg, a.kwarg) if x is not None]
            anns.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            anns.append(node.annotation)
        for ann in anns:
            if ann is not None:
                spans.append((ann.lineno, ann.col_offset, ann.end_lineno or ann.lineno,
                              ann.end_col_offset or 0))
    return spans


def _inside(row: int, col: int, span: tuple[int, int, int, int]) -> bool:
    l0, c0, l1, c1 = span
    return (l0, c0) <= (row, col) < (l1, c1)


def classify(work: Path, modules: list[str]) -> dict:
    """Score of the sample and its survivors by kind (and module)."""
    covered = coverage_of_catalogue(work, modules)
    db = sqlite3.connect(work / "session.sqlite")
    rows = db.execute("select m.job_id, m.module_path, m.start_pos_row, m.start_pos_col, "
                      "m.operator_name, w.test_outcome from mutation_specs m join "
                      "work_results w on m.job_id = w.job_id").fetchall()
    spans: dict[str, list] = {}
    kinds: Counter[str] = Counter()
    by_module: Counter[tuple[str, str]] = Counter()
    per_job: dict[str, str] = {}
    for job, path, row, col, _op, outcome in rows:
        if path not in spans:
            spans[path] = annotation_spans((work / path).read_text())
        outcome = (outcome or "").lower()
        if outcome == "killed":
            kind = "killed"
        elif outcome == "incompetent":
            kind = "incompetent"  # the mutated module does not even import
        elif any(_inside(row, col, s) for s in spans[path]):
            kind = "annotation"
        elif row not in covered.get(path, set()):
            kind = "not reached"
        else:
            kind = "reached"
        kinds[kind] += 1
        by_module[(path, kind)] += 1
        per_job[job] = kind
    (work / "kinds.json").write_text(json.dumps(per_job))
    return {"total": int((work / "total.txt").read_text()), "run": len(rows),
            "kinds": dict(kinds),
            "by_module": {f"{p} {k}": n for (p, k), n in sorted(by_module.items())}}


def replay(work: Path, jobs: int) -> list[tuple[str, str, str, str]]:
    """Run every survivor on a line the catalogue runs again, against today's catalogue and
    today's code: (location, mutation, outcome, failing cases). Each diff is applied with
    ``patch`` (no fuzz) to a fresh copy of the package; one that no longer applies (the code
    moved) is reported as such, not guessed at."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import conformance_mutants as cm

    if not (work / "kinds.json").exists():
        sys.exit("cosmic_ray_sample: no kinds.json in the workdir: run --report first")
    kinds = json.loads((work / "kinds.json").read_text())
    db = sqlite3.connect(work / "session.sqlite")
    rows = db.execute("select m.job_id, m.module_path, m.start_pos_row, m.operator_name, "
                      "w.diff from mutation_specs m join work_results w on "
                      "m.job_id = w.job_id order by m.module_path, m.start_pos_row").fetchall()
    todo = [r for r in rows if kinds.get(r[0]) == "reached"]

    def one(row: tuple) -> tuple[str, str, str, str]:
        _job, path, line, op, diff = row
        change = " / ".join(x[1:].strip() for x in diff.splitlines()
                            if x[:1] in "+-" and not x.startswith(("+++", "---")))
        where = f"{path}:{line}"
        with tempfile.TemporaryDirectory(prefix="uet-cr-replay-") as tmp:
            root = cm.make_copy(None, Path(tmp))
            body = diff.split("--- mutation diff ---\n", 1)[-1]
            body += "" if body.endswith("\n") else "\n"  # cosmic-ray drops the last one
            got = subprocess.run(["patch", "-p1", "-s", "--fuzz=0", "-d", str(root)],
                                 input=body, text=True, capture_output=True)
            if got.returncode != 0:
                return where, change, "no longer applies", ""
            bad, problem = cm.run_inprocess(root, False)
        if problem:
            return where, change, "killed", problem
        return where, change, "killed" if bad else "survives", ", ".join(sorted(bad))

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, todo))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--seed", type=int, default=22)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/uet-cosmic-ray"))
    ap.add_argument("--modules", nargs="+", default=["uet/pds", "uet/ses"])
    ap.add_argument("--report", action="store_true", help="classify an executed session")
    ap.add_argument("--replay", action="store_true",
                    help="run the survivors on executed lines again, against today's code "
                         "and catalogue (after --report)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="replays at once (2)")
    args = ap.parse_args()
    work = args.workdir.resolve()
    if args.replay:
        t0 = time.perf_counter()
        out = replay(work, args.jobs)
        print("| mutation | change | today | cases |\n|---|---|---|---|")
        for where, change, outcome, cases in out:
            print(f"| {where} | `{change}` | {outcome} | {cases or '-'} |")
        n = Counter(o[2] for o in out)
        print(f"replayed {len(out)} survivors on executed lines: "
              + ", ".join(f"{k} {v}" for k, v in sorted(n.items()))
              + f"; {time.perf_counter() - t0:.0f} s")
        return 0
    t0 = time.perf_counter()
    if not args.report:
        prepare(work, args.modules, args.sample, args.seed)
        _run([sys.executable, "-m", "cosmic_ray.cli", "exec", "cr.toml", "session.sqlite"],
             work)
    res = classify(work, args.modules)
    k = res["kinds"]
    competent = res["run"] - k.get("incompetent", 0)
    killed = k.get("killed", 0)
    judged = competent - k.get("annotation", 0) - k.get("not reached", 0)
    for key, n in sorted(res["by_module"].items()):
        print(f"{key:<40} {n}")
    print(f"sample {res['run']} of {res['total']} mutations (seed {args.seed}): "
          + ", ".join(f"{name} {n}" for name, n in sorted(k.items())))
    print(f"killed {killed} of {competent} ({100 * killed / max(competent, 1):.0f}%); "
          f"of the {judged} on lines the catalogue runs (annotations left out): "
          f"{100 * killed / max(judged, 1):.0f}%; {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
