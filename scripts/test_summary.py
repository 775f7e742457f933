#!/usr/bin/env python3
"""test_summary.py NAME=JUNIT.xml ...: the closing lines of scripts/test.sh.

Reads the JUnit files ctest wrote (--output-junit) for each run and prints
every test that did not pass (failed, not run, skipped) with its reason, then
"N passed, N failed, N skipped". A skip is a test that exited with its
SKIP_RETURN_CODE; its reason is the line it printed starting with "SKIPPED"
or "SKIP". A test ctest did not run (a failed fixture, a missing file) counts
as failed. Exit status 1 if anything failed or a run wrote no file."""
import sys
import xml.etree.ElementTree as ET

passed = failed = skipped = 0
lines = []
bad_input = False
for arg in sys.argv[1:]:
    run, _, path = arg.partition("=")
    try:
        cases = ET.parse(path).getroot().iter("testcase")
    except (OSError, ET.ParseError) as e:
        print(f"test summary: no results from {run} ({e})")
        bad_input = True
        continue
    for c in cases:
        name, status = c.get("name"), c.get("status")
        out = (c.findtext("system-out") or "").splitlines()
        skip = c.find("skipped")
        if status == "run":
            passed += 1
        elif skip is not None and (skip.get("message") or "").startswith(("SKIP_RETURN_CODE", "SKIP_REGULAR_EXPRESSION")):
            skipped += 1
            why = [l for l in out if l.lstrip().upper().startswith("SKIP")]
            lines.append(f"  skipped  {name} ({run}): " + (why[0].strip() if why else "(the test printed no reason)"))
        else:
            failed += 1
            why = skip.get("message") if skip is not None else "failed"
            tail = [l for l in out if l.strip()][-1:] if status == "fail" else []
            lines.append(f"  FAILED   {name} ({run}): {why}" + (f": {tail[0].strip()}" if tail else ""))
print("== summary")
for l in lines:
    print(l)
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or bad_input else 0)
