#!/usr/bin/env python3
"""Splits the selection of e2e tests into shards, and summarises their
reports (run.sh does both).

Usage:
  summary.py --shard SELECTED.json OUT_DIR N
      SELECTED.json: the suite's Ginkgo JSON report of a dry run of the
      selection. Writes OUT_DIR/selected.txt (one test a line, in name
      order), OUT_DIR/shard-1.focus ... shard-N.focus (a Ginkgo focus regex
      naming exactly its share of the tests that may run in parallel, dealt
      round-robin) and OUT_DIR/shard-serial.focus (the [Serial] ones).
      --only FILE: only the tests FILE names (one a line), each of which
      must be in the selection.
  summary.py OUT_DIR [--expected FILE] [--reasons FILE] [--strict]
      Reads OUT_DIR/selected.txt and the reports OUT_DIR/shard-*.json;
      writes OUT_DIR/summary.tsv (outcome, seconds, test, the first line of
      its failure; one line a test, in name order; a test selected that no
      report has is `unreported`: its process died, see its shard's log)
      and OUT_DIR/summary.md (a table, failures first, each with its
      reason), and prints the counts.

With --expected (default: expected.tsv beside this script, when it exists;
lines `OUTCOME<TAB>TEST`, as the first and third columns of summary.tsv),
it also prints every test whose outcome differs from the one expected
there (what a change to fakeapi fixed or broke), and how many expected
tests the run's selection left out. With --reasons (default: reasons.tsv beside this script; lines
`REGEX<TAB>REASON`, the first whose regex matches a test's name, or
`name :: failure`, wins), the table gives each test that did not pass its
reason. With --strict, it exits 1 unless every test's outcome is the
expected one (and the suite's setup did not fail).
"""

import json
import os
import re
import sys

# Ginkgo's states, grouped as the summary counts them.
FAILED = {"failed", "panicked", "timedout", "interrupted", "aborted"}


def first_line(text, limit=300):
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def specs(report):
    """(name, state, seconds, failure) of every test selected (a test the
    suite skipped itself, as a feature not enabled, has its reason; one the
    selection left out has none, and is not listed), and the suite's own
    failures (a BeforeSuite that failed skips everything)."""
    tests, suite = [], []
    for run in report:
        for spec in run.get("SpecReports") or []:
            kind = spec.get("LeafNodeType")
            failure = spec.get("Failure") or {}
            message = first_line(failure.get("Message", ""))
            if kind == "It" and spec.get("State") == "skipped" and not failure:
                continue  # left out by the run's selection (--focus, --skip)
            if kind == "It":
                name = spec_name(spec)
                tests.append((name, spec.get("State", "?"), spec.get("RunTime", 0) / 1e9, message))
            elif spec.get("State") in FAILED:
                suite.append((kind, message))
    tests.sort()
    return tests, suite


def spec_name(spec):
    return " ".join((spec.get("ContainerHierarchyTexts") or []) + [spec.get("LeafNodeText", "")])


def go_regex_escape(text):
    """A literal for Go's regexp (RE2): its metacharacters escaped."""
    return "".join("\\" + c if c in "\\.+*?()|[]{}^$" else c for c in text)


def shard(argv):
    selected_path, out, n = argv[2], argv[3], int(argv[4])
    with open(selected_path) as f:
        report = json.load(f)
    names, serial = [], []
    for run in report:
        for spec in run.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It" or spec.get("State") != "passed":
                continue  # (a dry run "passes" every test it would run)
            name = spec_name(spec)
            names.append(name)
            if spec.get("IsSerial") or "[Serial]" in name:
                serial.append(name)
    names.sort()
    if "--only" in argv:
        # A named subset of the selection (run.sh --ci: ci.txt); a name
        # that is not in the selection is an error, not a silent gap.
        only_path = argv[argv.index("--only") + 1]
        with open(only_path) as f:
            only = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")]
        unknown = sorted(set(only) - set(names))
        if unknown:
            for name in unknown:
                print(f"summary.py: {only_path}: not in the selection: {name}", file=sys.stderr)
            return 1
        names = [name for name in names if name in set(only)]
        serial = [name for name in serial if name in set(only)]
    with open(os.path.join(out, "selected.txt"), "w") as f:
        f.writelines(name + "\n" for name in names)
    parallel = [name for name in names if name not in serial]
    groups = {f"shard-{i + 1}": parallel[i::n] for i in range(n)}
    groups["shard-serial"] = sorted(serial)
    for group, members in groups.items():
        path = os.path.join(out, group + ".focus")
        if members:
            with open(path, "w") as f:
                f.write("(^| )(" + "|".join(go_regex_escape(m) for m in members) + ")$")
        elif os.path.exists(path):
            os.remove(path)
    return 0


def main(argv):
    if len(argv) >= 5 and argv[1] == "--shard":
        return shard(argv)
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[1]
    expected_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "expected.tsv")
    if "--expected" in argv:
        expected_path = argv[argv.index("--expected") + 1]
    try:
        with open(os.path.join(out, "selected.txt")) as f:
            selected = [line.rstrip("\n") for line in f if line.strip()]
    except OSError as e:
        print(f"summary.py: {e}", file=sys.stderr)
        return 1
    report = []
    for name in sorted(os.listdir(out)):
        if name.startswith("shard-") and name.endswith(".json"):
            try:
                with open(os.path.join(out, name)) as f:
                    report.extend(json.load(f))
            except (OSError, ValueError) as e:
                print(f"summary.py: cannot read {name}: {e}", file=sys.stderr)
    tests, suite = specs(report)
    reported = {t[0] for t in tests}
    for name in selected:
        if name not in reported:
            tests.append((name, "unreported", 0.0, "no report has it: its process died (see its shard's log)"))
    tests.sort()
    reasons_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reasons.tsv")
    if "--reasons" in argv:
        reasons_path = argv[argv.index("--reasons") + 1]
    reasons = []
    if os.path.exists(reasons_path):
        with open(reasons_path) as f:
            for n, line in enumerate(f, 1):
                if line.strip() and not line.startswith("#"):
                    pattern, _, text = line.rstrip("\n").partition("\t")
                    try:
                        reasons.append((re.compile(pattern), text))
                    except re.error as e:
                        print(f"summary.py: {reasons_path}:{n}: bad regex: {e}", file=sys.stderr)
                        return 1

    def reason(name, state, message):
        if state == "passed":
            return ""
        if state == "skipped":
            return f"the test skips itself here: {message}"
        for pattern, text in reasons:
            if pattern.search(f"{name} :: {message}"):
                return text
        return "(no reason written down)"
    with open(os.path.join(out, "summary.tsv"), "w") as f:
        for name, state, secs, message in tests:
            f.write(f"{state}\t{secs:.1f}\t{name}\t{message}\n")
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write("| outcome | s | test | failure | reason |\n|---|---|---|---|---|\n")
        order = {"passed": 1, "skipped": 2}
        for name, state, secs, message in sorted(tests, key=lambda t: (order.get(t[1], 0), t[0])):
            cells = [c.replace("|", "\\|") for c in (name, message, reason(name, state, message))]
            f.write(f"| {state} | {secs:.0f} | {cells[0]} | {cells[1]} | {cells[2]} |\n")
    counts = {}
    for _, state, _, _ in tests:
        counts[state] = counts.get(state, 0) + 1
    print("summary.py: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + f" ({len(tests)} tests)")
    for kind, message in suite:
        print(f"summary.py: the suite's {kind} failed: {message}")
    if os.path.exists(expected_path):
        expected = {}
        with open(expected_path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    state, name = line.rstrip("\n").split("\t", 1)
                    expected[name] = state
        seen = set()
        for name, state, _, message in tests:
            seen.add(name)
            want = expected.get(name)
            if want is None:
                print(f"summary.py: not in {os.path.basename(expected_path)}: {state}: {name}")
            elif want != state:
                print(f"summary.py: {want} -> {state}: {name}" + (f" ({message})" if message else ""))
        missing = set(expected) - seen
        if missing:
            print(f"summary.py: {len(missing)} tests of {os.path.basename(expected_path)} not in this run's selection")
    print(f"summary.py: {os.path.join(out, 'summary.md')}")
    if "--strict" in argv:
        # Every test as expected, and the suite's own setup sound.
        expected = {}
        if os.path.exists(expected_path):
            with open(expected_path) as f:
                for line in f:
                    if line.strip() and not line.startswith("#"):
                        state, name = line.rstrip("\n").split("\t", 1)
                        expected[name] = state
        wrong = [t for t in tests if expected.get(t[0]) != t[1]]
        if wrong or suite or not tests:
            print(f"summary.py: --strict: {len(wrong)} tests not as {os.path.basename(expected_path)} has them"
                  + (", the suite's setup failed" if suite else "") + (", no tests ran" if not tests else ""))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
