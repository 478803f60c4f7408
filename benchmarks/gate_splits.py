"""How often a clean gate reads same: every 3-against-3 split of a configuration's six clean runs
(a gate's base and head, the same code), each judged by `dlbench compare` as the gate judges."""

import collections
import csv
import itertools
import json
import subprocess
import sys
import tempfile
from pathlib import Path

base_csv, head_csv, planted = sys.argv[1], sys.argv[2], sys.argv[3:]  # planted: model:mode:batch


def key(r: dict) -> tuple[str, str, str]:
    return (r["model"], r["mode"], r["batch_size"])


rows = {}
for side in (base_csv, head_csv):
    with open(side) as f:
        reader = csv.DictReader(f)
        fields = reader.fieldnames
        for r in reader:
            rows.setdefault(key(r), []).append(r)
clean = {k: v for k, v in rows.items() if ":".join(k) not in planted and len(v) == 6}
tally = collections.defaultdict(collections.Counter)
out = Path(tempfile.mkdtemp())
for chosen in itertools.combinations(range(6), 3):
    for name, pick in (("a", chosen), ("b", tuple(i for i in range(6) if i not in chosen))):
        with open(out / f"{name}.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            for v in clean.values():
                for i in pick:
                    w.writerow(v[i])
    got = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlbench",
            "compare",
            str(out / "a.csv"),
            str(out / "b.csv"),
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    report = json.loads(got.stdout)
    for line in report["lines"]:
        tally[(line["model"], line["mode"], str(line["batch_size"]))][line["verdict"]] += 1
for k, c in sorted(tally.items()):
    print(":".join(k), dict(c))
