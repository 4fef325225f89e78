#!/usr/bin/env python3
"""Prints, one a line, the ninja targets that `meson test SELECTION` needs in a
configured build directory: each selected test's program (when the build
makes it) and the targets in the test's `depends`.

    scripts/test-targets.py BUILD_DIR [--suite S]... [--no-suite S]... [NAME]...

Selection as meson test does it: a test is in if it is in one of the --suite
suites or one of the NAMEs (everything when neither is given), and out if it
is in one of the --no-suite suites. A suite matches as 'S' or 'project:S'."""
import json
import os
import subprocess
import sys


def main(argv):
    if not argv:
        sys.exit(__doc__)
    build = os.path.realpath(argv[0])
    suites, skip, names = set(), set(), set()
    args = iter(argv[1:])
    for a in args:
        if a in ("--suite", "--no-suite"):
            (suites if a == "--suite" else skip).add(next(args))
        elif a.startswith("--suite="):
            suites.add(a.split("=", 1)[1])
        elif a.startswith("--no-suite="):
            skip.add(a.split("=", 1)[1])
        elif a.startswith("-"):
            sys.exit(f"test-targets.py: unsupported option {a}")
        else:
            names.add(a)

    def introspect(what):
        out = subprocess.check_output(["meson", "introspect", build, what])
        return json.loads(out)

    def matches(test_suites, wanted):
        return any(s in wanted or s.split(":")[-1] in wanted for s in test_suites)

    files = {t["id"]: t["filename"] for t in introspect("--targets")}
    built = {os.path.realpath(f) for fs in files.values() for f in fs}
    out = set()
    for t in introspect("--tests"):
        chosen = (not suites and not names) or t["name"] in names or matches(t["suite"], suites)
        if not chosen or matches(t["suite"], skip):
            continue
        paths = [os.path.realpath(t["cmd"][0])] if t["cmd"] else []
        for dep in t.get("depends", []):
            paths += [os.path.realpath(f) for f in files.get(dep, [])]
        out.update(os.path.relpath(p, build) for p in paths if p in built)
    print("\n".join(sorted(out)))


if __name__ == "__main__":
    main(sys.argv[1:])
