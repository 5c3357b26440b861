"""Fuzzing: schemathesis generates requests from /openapi.json; no response may be a 5xx or break its schema.

    python scripts/fuzz.py                                   # starts `nsample serve` on the tiny model (max n 4,
                                                             # context 96 tokens, so each request is quick)
    python scripts/fuzz.py --url http://127.0.0.1:8000 --max-examples 200

Runs schemathesis's coverage phase (boundary and invalid values of every field) and its fuzzing phase
(`--max-examples` random bodies per operation, valid and invalid) with the checks not_a_server_error,
status_code_conformance, content_type_conformance and response_schema_conformance (each SSE event of a stream
too); then the hand-written cases of fuzz_cases.py, which schemathesis cannot generate (lone surrogates, NUL,
numbers too long for their type, deep nesting, at every field of the schema). Prints the number of requests, the
status codes seen, the 5xx responses and the failed checks (the hand-written cases under "cases"); exits 1 on any.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import fuzz_cases
from server_process import add_arguments, target

CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
SMALL_SERVER = ["--max-n=4", "--max-context=96"]


def schemathesis(url: str, args, report_dir: str) -> int:
    cmd = [str(Path(sys.executable).with_name("schemathesis")), "run", url + "/openapi.json", "--checks", CHECKS,
           "--phases", args.phases, "--max-examples", str(args.max_examples), "--seed", str(args.seed),
           "--generation-database", "none", "--request-timeout", "120", "--no-color", "--continue-on-failure",
           "--workers", str(args.workers), "--report", "ndjson", "--report-dir", report_dir]
    if args.api_key:
        cmd += ["--header", f"Authorization: Bearer {args.api_key}"]
    out = None if args.verbose else subprocess.DEVNULL
    return subprocess.run(cmd, stdout=out, cwd=report_dir).returncode  # its cache stays out of the repository


def tally(report_dir: str) -> dict:
    """Requests, their status codes and the failed checks, from schemathesis's NDJSON event log."""
    statuses, failed, requests = Counter(), Counter(), 0
    for path in Path(report_dir).glob("*.ndjson"):
        for line in path.read_text().splitlines():
            event = json.loads(line).get("ScenarioFinished")
            if not event:
                continue
            recorder = event["recorder"]
            for interaction in recorder.get("interactions", {}).values():
                requests += 1
                response = interaction.get("response")
                statuses[response["status_code"] if response else "no response"] += 1
            for checks in recorder.get("checks", {}).values():
                failed.update(c["name"] for c in checks if c["status"] == "failure")
    server_errors = sum(k for s, k in statuses.items() if isinstance(s, int) and s >= 500)
    return {"requests": requests, "statuses": dict(sorted(statuses.items(), key=str)), "responses_5xx": server_errors,
            "schema_violations": failed["response_schema_conformance"], "failed_checks": dict(failed)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    p.add_argument("--max-examples", type=int, default=300, help="random bodies per operation (fuzzing phase)")
    p.add_argument("--phases", default="coverage,fuzzing", help="schemathesis phases")
    p.add_argument("--seed", type=int, default=1, help="schemathesis seed, for a repeatable run")
    p.add_argument("--workers", type=int, default=2, help="concurrent schemathesis workers")
    p.add_argument("--verbose", action="store_true", help="show schemathesis's own output")
    p.add_argument("--json", help="also write the report to this file")
    args = p.parse_args(argv)
    if not args.url and not args.serve_arg:
        args.serve_arg = SMALL_SERVER
    with target(args) as server, tempfile.TemporaryDirectory() as reports:
        code = schemathesis(server.url, args, reports)
        out = tally(reports)
        cases = fuzz_cases.run(server.url, args.api_key)
    out = {**out, "responses_5xx": out["responses_5xx"] + cases["responses_5xx"], "cases": cases}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    failed = code or out["responses_5xx"] or out["failed_checks"] or cases["failures"]
    return 1 if failed or not out["requests"] or not cases["requests"] else 0


if __name__ == "__main__":
    sys.exit(main())
