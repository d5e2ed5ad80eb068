"""Check the main job's output beyond its exit status: every route of the config scored rows.

``rewardlab score`` already exits 1 when the pipeline failed on any row; this also fails the run
when a route was never reached or none of its rows was scored (a route whose rows all turned
out ``not_applicable`` or ``invalid_input`` would otherwise pass unseen).

Usage: python .ci/check_main_job.py SCORES.jsonl CONFIG.yaml
"""

import json
import sys
from collections import Counter
from pathlib import Path

import yaml


def main(scores: Path, config: Path) -> int:
    routes = set(yaml.safe_load(config.read_text())["routes"])
    statuses: dict[str, Counter[str]] = {route: Counter() for route in routes}
    for line in scores.read_text().splitlines():
        record = json.loads(line)
        route = (record.get("details") or {}).get("route")
        if route in statuses:
            statuses[route][record["status"]] += 1
    problems = [
        f"route {route!r} scored no row: {dict(counts)}"
        for route, counts in statuses.items()
        if not counts["ok"]
    ]
    for problem in problems:
        print(f"main job: {problem}", file=sys.stderr)
    print(
        "main job: rows scored per route: " + ", ".join(f"{r} {c['ok']}" for r, c in sorted(statuses.items()))
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
