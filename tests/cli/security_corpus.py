#!/usr/bin/env python3
"""`ckpt check` on the security corpus (testdata/security/, issue K), against Python's own verdicts.

testdata/security/expected.json gives, for every file, what torch.load(weights_only=False) /
pickle.load would call (gen_security.py's oracle, never ckpt) and so the exit statuses `ckpt check`
may give at the default --fail-on error. For every file this runs, in a fresh temporary working
directory with CKPT_SENTINEL pointing into it:

    ckpt check FILE, ckpt check --json FILE, ckpt summary FILE

and checks:
- the exit status of `check` is one of the file's `exit` (malicious, dangerous-reference, tampered: 1; clean / referenced-only: 0;
  extras-only and dormant: 0 or 1; refused: 0, 1 or 3), and the same with --json; JSON `failed` agrees;
- a malicious or dangerous-reference file has a dangerous-global finding whose `where` names each
  global of `must_name` (any listed spelling); a referenced-only file has an unknown-global finding and
  no error; a tampered file has a tensor-mutated finding;
- stdout and stderr of all three are clean: UTF-8, no control character but newline; stderr at most one line,
  `ckpt: error: ...`; the text report's lines have the documented shapes; --json prints one document,
  valid against schemas/ckpt.check-1.schema.json;
- `summary` exits 0, 1 or 3, and nothing ends by a signal or with a status >= 128;
- every run ends within 20 s;
- the sentinel ($CKPT_SENTINEL, ./ckpt-sentinel, or a new /tmp/ckpt-sentinel) never appears.

Prints a FAIL line per failed file with the reasons, a NOTE line per extras-only file saying what
ckpt did with the extras, and the counts. Exit status 1 when a file failed.
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_schemas  # noqa: E402

LIMIT_S = 20
TEXT_LINE = re.compile(r"^(?:(?:error|warning|info)\[[a-z0-9-]+\]: .*|  at: .*|  \.\.\. and \d+ more|  fix: .*"
                       r"|.*: \d+ error\(s\), \d+ warning\(s\), \d+ info; --fail-on [a-z]+: "
                       r"(?:pass|FAIL|INCOMPLETE, not fully scanned: .*)"
                       r"|.*: NOT SCANNED: .*; --fail-on [a-z]+: (?:FAIL|not failed))$")
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def run(cmd, cwd, env):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, timeout=LIMIT_S)
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or b"", e.stderr or b"", time.monotonic() - t0


def clean_streams(label, out, err, problems, text_report=False):
    for name, data in (("stdout", out), ("stderr", err)):
        try:
            s = data.decode("utf-8")
        except UnicodeDecodeError as e:
            problems.append("%s %s is not UTF-8 (%s)" % (label, name, e))
            continue
        bad = CONTROL.search(s)
        if bad:
            problems.append("%s %s holds control character %r" % (label, name, bad.group()))
        if name == "stderr" and s:
            # One `ckpt: error:` line, after which nothing; `summary` names the security findings of a
            # file it cannot read first, one `ckpt: error[ID]:` / `ckpt: warning[ID]:` line each.
            lines = s.rstrip("\n").split("\n")
            finding = re.compile(r"^ckpt: (error|warning)\[(dangerous-global|unknown-global)\]: ")
            if (not lines[-1].startswith("ckpt: error: ") or not s.endswith("\n")
                    or not all(finding.match(l) for l in lines[:-1])):
                problems.append("%s stderr is not finding lines and one `ckpt: error:` line: %r" % (label, s[:200]))
        if name == "stdout" and text_report and s:
            for line in s.rstrip("\n").split("\n"):
                if not TEXT_LINE.match(line):
                    problems.append("%s stdout line of unknown shape: %r" % (label, line[:200]))
                    break


def names(where_list, alts):
    return any(a in w for w in where_list for a in alts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--only", default="", help="only files whose path contains this")
    a = ap.parse_args()
    sec = os.path.join(os.path.abspath(a.root), "testdata", "security")
    ckpt = os.path.abspath(a.ckpt)
    schemas = json_schemas.Schemas(os.path.abspath(a.root))
    with open(os.path.join(sec, "expected.json")) as f:
        expected = json.load(f)["files"]
    fixed_sentinel = "/tmp/ckpt-sentinel"
    fixed_before = os.path.exists(fixed_sentinel)
    failed, notes = [], []
    by_verdict = collections.Counter()
    ok_by_verdict = collections.Counter()
    t_start = time.monotonic()
    for rel, e in expected.items():
        if a.only and a.only not in rel:
            continue
        path = os.path.join(sec, rel)
        verdict = e["verdict"]
        by_verdict[verdict] += 1
        problems = []
        with tempfile.TemporaryDirectory(prefix="ckpt-security-") as tmp:
            sentinel = os.path.join(tmp, "sentinel")
            env = dict(os.environ, CKPT_SENTINEL=sentinel, NO_COLOR="1")
            rc, out, err, dt = run([ckpt, "check", path], tmp, env)
            jrc, jout, jerr, jdt = run([ckpt, "check", "--json", path], tmp, env)
            src, sout, serr, sdt = run([ckpt, "summary", path], tmp, env)
            for label, code, secs in (("check", rc, dt), ("check --json", jrc, jdt), ("summary", src, sdt)):
                if code is None:
                    problems.append("%s did not finish within %d s" % (label, LIMIT_S))
                elif code < 0 or code >= 128:
                    problems.append("%s ended with status %d (signal or crash)" % (label, code))
                elif secs >= LIMIT_S:
                    problems.append("%s took %.1f s" % (label, secs))
            if src is not None and src not in (0, 1, 3) and not (src < 0 or src >= 128):
                problems.append("summary exit %d, not 0/1/3" % src)
            if rc is not None and rc not in e["exit"]:
                called = ", ".join(c["global"] for c in e["called"]) or "-"
                problems.append("check exit %d, expected %s (%s; called: %s)" % (rc, e["exit"], verdict, called))
            if rc is not None and jrc is not None and rc != jrc:
                problems.append("check exit %d but check --json exit %d" % (rc, jrc))
            clean_streams("check", out, err, problems, text_report=True)
            clean_streams("check --json", b"", jerr, problems)
            clean_streams("summary", sout, serr, problems)
            doc = None
            if jrc is not None:
                try:
                    doc = json.loads(jout.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError) as ex:
                    if jrc != 3 or jout.strip():
                        problems.append("check --json: no JSON document (%s)" % ex)
            findings = (doc or {}).get("findings", [])
            if doc is not None:
                if doc.get("schema") != "ckpt.check/1":
                    problems.append("check --json: schema %r" % doc.get("schema"))
                problems += ["check --json: " + pr for pr in schemas.problems(doc)]
                if doc.get("failed") != (jrc == 1):
                    problems.append("check --json: failed=%r with exit %d" % (doc.get("failed"), jrc))
            dangerous = [w for f in findings if f.get("id") == "dangerous-global" for w in f.get("where", [])]
            if verdict in ("malicious", "dangerous-reference") and rc == 1:
                for alts in e.get("must_name", []):
                    if not names(dangerous, alts):
                        problems.append("no dangerous-global finding names %s" % " / ".join(alts))
            if verdict == "referenced-only" and doc is not None:
                if not any(f.get("id") == "unknown-global" for f in findings):
                    problems.append("no unknown-global finding (referenced only: %s)"
                                    % ", ".join(e.get("referenced_only", [])))
                if any(f.get("severity") == "error" for f in findings):
                    problems.append("an error finding on a file that only references globals: %s"
                                    % ", ".join(f["id"] for f in findings if f.get("severity") == "error"))
            if verdict == "tampered" and doc is not None and not any(f.get("id") == "tensor-mutated" for f in findings):
                problems.append("no tensor-mutated finding (torch.load returns values other than the stored bytes)")
            if verdict == "extras-only" and rc is not None:
                flagged = [x for x in e.get("extras_called", []) if names(dangerous, [x])]
                notes.append("NOTE %s: extras-only, exit %d; extras called: %s; named dangerous: %s"
                             % (rel, rc, ", ".join(e.get("extras_called", [])), ", ".join(flagged) or "none"))
            for s in (sentinel, os.path.join(tmp, "ckpt-sentinel")):
                if os.path.exists(s):
                    problems.append("THE SENTINEL WAS CREATED (%s): something ran" % s)
            if not fixed_before and os.path.exists(fixed_sentinel):
                problems.append("/tmp/ckpt-sentinel appeared: something ran")
        if problems:
            failed.append(rel)
            print("FAIL %s [%s]: %s" % (rel, verdict, "; ".join(problems)))
        else:
            ok_by_verdict[verdict] += 1
    for n in notes:
        print(n)
    total = sum(by_verdict.values())
    print("security corpus: %d files, %d passed, %d failed in %.1f s (%s)" % (
        total, total - len(failed), len(failed), time.monotonic() - t_start,
        ", ".join("%s %d/%d" % (v, ok_by_verdict[v], n) for v, n in sorted(by_verdict.items()))))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
