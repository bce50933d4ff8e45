#!/usr/bin/env python3
"""Runs the CI integrations on real fixtures: scripts/action-check.sh and action.yml's step (`action`),
or the pre-commit hook from .pre-commit-hooks.yaml through Debian's pre-commit (`precommit`).

A benign file passes and a malicious one from testdata/security fails, each with the exit status
expected.json records for it (what Python's own loader would do, not ckpt's output).
"""
import argparse
import json
import os
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
