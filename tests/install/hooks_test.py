#!/usr/bin/env python3
"""Runs the CI integrations on real fixtures: scripts/action-check.sh and action.yml's step (`action`),
or the pre-commit hook from .pre-commit-hooks.yaml through Debian's pre-commit (`precommit`).

A benign file passes and a malicious one from testdata/security fails, each with the exit status
expected.json records for it (what Python's own loader would do, not ckpt's output). The script hands
all its files to one `ckpt check` call: three files give one SARIF log (SARIF 2.1.0 schema) or JSON
Lines in --output, and exit 1 for the failed file although another is unreadable; a fake older ckpt
(one file per call, with or without --format) exercises the fallback.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

BENIGN = "recreated/modelscan/safe_zip_pytorch.pt"
MALICIOUS = "recreated/modelscan/unsafe_zip_injected.pt"
failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}\n{detail}", file=sys.stderr)


def git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", repo, *args],
                   check=True, capture_output=True)


def make_repo(tmp, root, files):
    """A git repo with the named security fixtures committed as NAME.pt, one commit each."""
    repo = os.path.join(tmp, "repo")
    os.makedirs(repo)
    git(repo, "init", "-q")
    for name, fixture in files:
        shutil.copy(os.path.join(root, "testdata/security", fixture), os.path.join(repo, name))
        git(repo, "add", name)
        git(repo, "commit", "-qm", name)
    return repo


def run(cmd, cwd, env=None):
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def test_action(root, ckpt, want):
    script = os.path.join(root, "scripts/action-check.sh")
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(tmp, root, [("good.pt", BENIGN), ("evil.pt", MALICIOUS)])
        with open(os.path.join(repo, "notes.txt"), "w") as f:
            f.write("not a checkpoint\n")
        git(repo, "add", "notes.txt")
        git(repo, "commit", "-qm", "notes")

        rc, out = run([script, "--ckpt", ckpt, "good.pt"], repo)
        expect(f"benign file: exit {want[BENIGN]}", rc == want[BENIGN], out)
        rc, out = run([script, "--ckpt", ckpt, "good.pt", "evil.pt"], repo)
        expect(f"benign + malicious: exit {want[MALICIOUS]}", rc == want[MALICIOUS], out)
        expect("the malicious file's finding is printed", "evil.pt" in out and "posix.system" in out, out)
        rc, out = run([script, "--ckpt", ckpt, "--fail-on", "never", "evil.pt"], repo)
        expect("--fail-on never passes", rc == 0, out)
        # Changed files only: HEAD~2..HEAD added evil.pt and notes.txt, so good.pt is not checked.
        rc, out = run([script, "--ckpt", ckpt, "--base", "HEAD~2"], repo)
        expect("--base HEAD~2 checks evil.pt only", rc == want[MALICIOUS] and "good.pt" not in out
               and "notes.txt" not in out, out)
        rc, out = run([script, "--ckpt", ckpt, "--base", "HEAD~1"], repo)
        expect("--base HEAD~1 has no checkpoint to check", rc == 0 and "no checkpoint files" in out, out)
        rc, out = run([script, "--ckpt", ckpt, "--base", "0" * 40], repo)
        expect("an all-zeros base checks every tracked checkpoint", rc == want[MALICIOUS]
               and "good.pt" in out and "evil.pt" in out, out)
        report = os.path.join(tmp, "report.json")
        rc, out = run([script, "--ckpt", ckpt, "--format", "json", "--output", report, "good.pt"], repo)
        doc = json.loads(open(report).read()) if rc == 0 and os.path.getsize(report) else {}
        expect("--format json --output writes ckpt.check/1", doc.get("schema") == "ckpt.check/1", out)
        rc, out = run([script, "--ckpt", os.path.join(tmp, "none"), "good.pt"], repo)
        expect("a missing ckpt exits 4", rc == 4, out)
        test_one_call(root, ckpt, want, tmp, repo, script)
        test_older_ckpt(ckpt, want, tmp, repo, script)

        # action.yml's check step as GitHub runs it: its `run` script with the inputs in env.
        action = yaml.safe_load(open(os.path.join(root, "action.yml")))
        step = next(s for s in action["runs"]["steps"] if s["name"] == "ckpt check")
        env = dict(os.environ, GITHUB_ACTION_PATH=root, CKPT=ckpt, FILES="", BASE="HEAD~2",
                   FAIL_ON="error", FORMAT="text", OUTPUT="", GITHUB_ACTIONS="true",
                   GITHUB_STEP_SUMMARY=os.path.join(tmp, "summary.md"))
        rc, out = run(["bash", "-e", "-c", step["run"]], repo, env)
        expect("action step fails on the changed malicious file", rc == want[MALICIOUS]
               and "::error file=evil.pt::" in out, out)
        expect("action step writes the job summary", "1 failed" in open(env["GITHUB_STEP_SUMMARY"]).read())
        env.update(FILES="good.pt", BASE="")
        rc, out = run(["bash", "-e", "-c", step["run"]], repo, env)
        expect("action step passes the benign file", rc == want[BENIGN], out)

        # The files a push changed are picked with the directory walk's extensions (any case): a .PKL too.
        walk = set(re.findall(r'"\.(\w+)"', open(os.path.join(root, "src/cli/inputs.cc")).read().split(
            "kCheckpointExtensions[] = {")[1].split("}")[0]))
        m = re.search(r"^pattern='\\\.\(([^)]*)\)\$'$", open(script).read(), re.M)
        expect("the script's pattern is the walk's extension list", m and set(m.group(1).split("|")) == walk,
               f"walk {sorted(walk)}, script {m and m.group(1)}")
        shutil.copy(os.path.join(repo, "evil.pt"), os.path.join(repo, "evil.PKL"))
        git(repo, "add", "evil.PKL")
        git(repo, "commit", "-qm", "pickle")
        rc, out = run([script, "--ckpt", ckpt, "--base", "HEAD~1"], repo)
        expect("a changed .PKL file is checked", rc == want[MALICIOUS] and "evil.PKL" in out, out)


def sarif_problems(root, doc):
    """The official SARIF 2.1.0 schema's complaints about a log (tests/schemas/external/)."""
    import jsonschema
    schema = json.load(open(os.path.join(root, "tests/schemas/external/sarif-schema-2.1.0.json")))
    return [e.message[:200] for e in jsonschema.Draft4Validator(schema).iter_errors(doc)][:5]


def test_one_call(root, ckpt, want, tmp, repo, script):
    """Three files go to one `ckpt check` call: --output holds ONE report for them all (one SARIF log,
    JSON Lines), and the script's exit status still puts a failed file (1) before an unreadable one (3),
    which ckpt's own ranking (0 < 1 < 3 < 4) does not."""
    sys.path.insert(0, os.path.join(root, "tests/cli"))
    import json_schemas
    shutil.copy(os.path.join(root, "testdata/t113/lightning.ckpt"), os.path.join(repo, "light.ckpt"))
    with open(os.path.join(repo, "junk.pt"), "w") as f:
        f.write("not a checkpoint\n")
    three = ["evil.pt", "light.ckpt", "junk.pt"]  # fail, pass (one info finding), not fully scanned
    direct = subprocess.run([ckpt, "check", *three], cwd=repo, capture_output=True, text=True)
    expect("ckpt itself ranks the unreadable file first: exit 3", direct.returncode == 3,
           direct.stdout + direct.stderr)

    report = os.path.join(tmp, "three.jsonl")
    rc, out = run([script, "--ckpt", ckpt, "--format", "json", "--output", report, *three], repo)
    expect(f"--format json, 3 files: exit {want[MALICIOUS]}", rc == want[MALICIOUS], out)
    lines = open(report).read().splitlines()
    try:
        docs = [json.loads(line) for line in lines]
    except ValueError as e:
        docs = []
        expect("--format json --output with 3 files is JSON Lines", False, f"{e}\n" + "\n".join(lines)[:2000])
    expect("one ckpt.check/1 document per file, in order", len(lines) == 3
           and [d.get("file") for d in docs] == three, "\n".join(lines)[:2000])
    problems = [p for d in docs for p in json_schemas.Schemas(root).problems(d)]
    expect("each line satisfies schemas/ckpt.check-1.schema.json", not problems, "\n".join(problems))
    expect("their statuses: fail, pass, not fully scanned",
           [d.get("status") for d in docs][:2] == ["fail", "pass"] and len(docs) == 3
           and docs[2].get("status") in ("incomplete", "unscanned"), str([d.get("status") for d in docs]))

    sarif = os.path.join(tmp, "three.sarif")
    rc, out = run([script, "--ckpt", ckpt, "--format", "sarif", "--output", sarif, *three], repo)
    expect(f"--format sarif, 3 files: exit {want[MALICIOUS]} (a failed file beats an unreadable one)",
           rc == want[MALICIOUS], out)
    try:
        log = json.load(open(sarif))
    except ValueError as e:
        log = {}
        expect("--format sarif --output with 3 files is one JSON document", False, f"{e}\n{open(sarif).read()[:2000]}")
    runs = log.get("runs", [])
    expect("the SARIF log has one run", len(runs) == 1, json.dumps(log)[:2000])
    if runs:
        problems = sarif_problems(root, log)
        expect("the SARIF log satisfies the SARIF 2.1.0 schema", not problems, "\n".join(problems))
        arts = [(a["location"]["uri"], a["properties"]["status"]) for a in runs[0].get("artifacts", [])]
        expect("its artifacts are the three files in order, with their status",
               [u for u, _ in arts] == three and arts[0][1] == "fail" and arts[1][1] == "pass"
               and arts[2][1] in ("incomplete", "unscanned"), str(arts))
        # Every file's findings, as many results naming it as its JSON Lines document has findings.
        results = {f: sum(1 for r in runs[0].get("results", [])
                          if any(loc["physicalLocation"]["artifactLocation"]["uri"] == f for loc in r.get("locations", [])))
                   for f in three}
        # (a file not fully read has one more: its `unreadable` result)
        findings = {d.get("file"): len(d.get("findings", [])) + (1 if d.get("read_error") else 0) for d in docs}
        expect("its results hold each file's findings (as many as in the JSON)", results == findings
               and results["evil.pt"] > 0 and results["light.ckpt"] > 0, f"SARIF {results}, JSON {findings}")
        notes = runs[0].get("invocations", [{}])[0].get("toolExecutionNotifications", [])
        expect("its invocation has a notification for the file not fully scanned",
               any("junk.pt" in json.dumps(n) for n in notes), json.dumps(notes))
        rules = {r["ruleId"] for r in runs[0].get("results", [])}
        expect("its results hold the malicious file's dangerous-global", "dangerous-global" in rules, str(rules))

    # Text, under GitHub Actions: one annotation per file that did not pass, read from the report.
    env = dict(os.environ, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=os.path.join(tmp, "three.md"))
    rc, out = run([script, "--ckpt", ckpt, *three], repo, env)
    expect(f"text, 3 files: exit {want[MALICIOUS]}", rc == want[MALICIOUS], out)
    expect("text: each file's report is printed", all(f"{f}: " in out for f in three), out)
    notes = sorted(line.split("::")[1] for line in out.splitlines() if line.startswith("::error "))
    expect("an annotation on evil.pt and junk.pt, none on light.ckpt",
           notes == ["error file=evil.pt", "error file=junk.pt"], out)
    expect("the job summary counts 2 of 3 failed", "3 file(s), 2 failed" in open(env["GITHUB_STEP_SUMMARY"]).read())
    rc, out = run([script, "--ckpt", ckpt, "--fail-on", "never", *three], repo, env)
    expect("--fail-on never, 3 files: exit 0 and no annotation", rc == 0 and "::error" not in out, out)
    rc, out = run([script, "--ckpt", ckpt, "light.ckpt", "junk.pt"], repo)
    expect("no failed file: the unreadable one's exit 3", rc == 3, out)


def test_older_ckpt(ckpt, want, tmp, repo, script):
    """A ckpt from before several FILEs (its check takes one file per call), with or without --format:
    the script falls back to one call per file; SARIF then takes one file, JSON is a stream of documents."""
    def fake(name, options):
        path = os.path.join(tmp, name)
        with open(path, "w") as f:
            f.write(f"""#!/usr/bin/env bash
if [ "${{2:-}}" = --help ]; then printf 'Usage: ckpt check [OPTIONS] file\\n{options}'; exit 0; fi
n=0 seen=0
for a in "$@"; do [ $seen = 1 ] && n=$((n + 1)); [ "$a" = -- ] && seen=1; done
[ $n = 1 ] || {{ echo "ckpt: error: check takes one file" >&2; exit 2; }}
exec {ckpt} "$@"
""")
        os.chmod(path, 0o755)
        return path
    only_json = fake("ckpt-json", r"  --json  JSON output\n  --fail-on TEXT\n")
    with_format = fake("ckpt-format", r"  --json  JSON output\n  --format FORMAT\n  --fail-on TEXT\n")
    rc, out = run([script, "--ckpt", only_json, "good.pt", "evil.pt"], repo)
    expect(f"older ckpt, text, 2 files: exit {want[MALICIOUS]}", rc == want[MALICIOUS]
           and "good.pt: " in out and "evil.pt: " in out, out)
    report = os.path.join(tmp, "older.json")
    rc, out = run([script, "--ckpt", only_json, "--format", "json", "--output", report, "good.pt", "evil.pt"], repo)
    text, docs, dec, pos = open(report).read(), [], json.JSONDecoder(), 0
    try:
        while text[pos:].strip():
            pos += len(text[pos:]) - len(text[pos:].lstrip())
            doc, pos = dec.raw_decode(text, pos)
            docs.append(doc)
    except ValueError as e:
        expect("older ckpt, --format json: a stream of documents", False, f"{e}\n{text[:2000]}")
    expect("older ckpt (only --json), --format json: one document per file",
           rc == want[MALICIOUS] and [d.get("file") for d in docs] == ["good.pt", "evil.pt"], out)
    rc, out = run([script, "--ckpt", only_json, "--format", "sarif", "good.pt"], repo)
    expect("older ckpt without --format: sarif is refused (exit 2)", rc == 2 and "no --format sarif" in out, out)
    rc, out = run([script, "--ckpt", with_format, "--format", "sarif", "good.pt", "evil.pt"], repo)
    expect("older ckpt, sarif, 2 files: refused (exit 2), no pile of logs", rc == 2 and "SARIF" in out, out)
    sarif = os.path.join(tmp, "older.sarif")
    rc, out = run([script, "--ckpt", with_format, "--format", "sarif", "--output", sarif, "evil.pt"], repo)
    log = json.load(open(sarif)) if os.path.getsize(sarif) else {}
    expect(f"older ckpt, sarif, 1 file: exit {want[MALICIOUS]}, one log", rc == want[MALICIOUS]
           and len(log.get("runs", [])) == 1, out)


def test_precommit(root, ckpt, want):
    if not shutil.which("pre-commit"):
        sys.exit("pre-commit is not installed (scripts/deps.sh installs Debian's)")
    hooks = yaml.safe_load(open(os.path.join(root, ".pre-commit-hooks.yaml")))
    expect("the hook is language: script (no network)", hooks[0]["language"] == "script")
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_repo(tmp, root, [("good.pt", BENIGN), ("evil.ckpt", MALICIOUS)])
        env = dict(os.environ, PRE_COMMIT_HOME=os.path.join(tmp, "home"),
                   PATH=os.path.dirname(ckpt) + os.pathsep + os.environ["PATH"])
        try_repo = ["pre-commit", "try-repo", root, hooks[0]["id"]]
        rc, out = run(try_repo + ["--files", "good.pt"], repo, env)
        expect(f"pre-commit on the benign file: exit {want[BENIGN]}", rc == want[BENIGN] and "Passed" in out, out)
        rc, out = run(try_repo + ["--all-files"], repo, env)
        # pre-commit exits 1 for any failed hook; the hook's own status is in its report.
        expect("pre-commit fails on the malicious file", rc == 1 and "Failed" in out
               and f"exit code: {want[MALICIOUS]}" in out and "evil.ckpt" in out, out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["action", "precommit"])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    ckpt = os.path.abspath(args.ckpt)
    expected = json.load(open(os.path.join(args.root, "testdata/security/expected.json")))["files"]
    want = {f: expected[f]["exit"][0] for f in (BENIGN, MALICIOUS)}
    (test_action if args.mode == "action" else test_precommit)(args.root, ckpt, want)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print(f"{args.mode}: all checks passed")


if __name__ == "__main__":
    main()
