#!/usr/bin/env python3
"""The README's two set-up commands work in either order on a fresh clone (issue 27).

It tests the COMMITTED tree: `git clone` of the repository at --root, checked out at its HEAD commit,
so uncommitted changes in the working tree (and whatever build/ holds there) play no part. In that
one clone (one full build, to spare CI time) it runs:

  1. scripts/example.sh   exit 0; stdout is the summary of testdata/t113/lightning.ckpt, whose totals
                          (parameters, trainable, non-trainable, buffers) are those PyTorch recorded in
                          testdata/t113/lightning.expected.json; build/ has no ckpt-torch (the README:
                          a fresh build/ without LibTorch)
  2. scripts/test.sh -N   exit 0 (ctest -N only lists the tests); build/ckpt-torch was built and the
                          list has the LibTorch tests (load_cases, forward_cases, load_cuda: every test
                          that tests/CMakeLists.txt adds under `if(TARGET ckpt-torch)`)
  3. scripts/example.sh   after test.sh: exit 0, the same stdout as step 1
  4. scripts/test.sh -N   after example.sh: exit 0, still the LibTorch tests

Each step's wall time is printed. The scripts call scripts/deps.sh, which installs missing Debian
packages (through sudo when not root). Exit 77 (ctest: skipped) when --root is not a git checkout.

    readme_order_test.py --root SRC [--work DIR] [--keep] [--timeout SECONDS]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77
# Named here so that a rename shows up as a failure, not as a shorter list.
TORCH_TESTS = ["load_cases", "forward_cases", "load_cuda"]
failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}" + (f"\n{detail}" if detail else ""), file=sys.stderr, flush=True)
    return ok


def tail(text, n=60):
    return "\n".join(text.splitlines()[-n:])


def torch_tests_in(cmakelists):
    """The add_test NAMEs inside each `if(TARGET ckpt-torch)` ... `endif()` block of tests/CMakeLists.txt."""
    names, depth = [], 0
    for line in open(cmakelists):
        s = line.strip()
        if depth == 0:
            if s == "if(TARGET ckpt-torch)":
                depth = 1
            continue
        if re.match(r"if\s*\(", s):
            depth += 1
        elif re.match(r"endif\s*\(", s):
            depth -= 1
        m = re.match(r"add_test\s*\(\s*NAME\s+(\S+)", s)
        if m:
            names.append(m.group(1))
    return names


def listed_tests(ctest_n):
    """Test names from `ctest -N`: lines '  Test #12: name'."""
    return re.findall(r"^\s*Test\s+#\d+: (.+?)\s*$", ctest_n, re.M)


def summary_totals(out):
    """The totals lines of a summary table: {'Total params': 244, ...}."""
    got = {}
    for label in ("Trainable params", "Non-trainable params", "Total params", "Buffers"):
        m = re.search(rf"^(\d+)\s+{label}\b", out, re.M)
        if m:
            got[label] = int(m.group(1))
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", required=True, help="the repository under test (its HEAD commit is cloned)")
    ap.add_argument("--work", default=None, help="parent directory of the temporary clone (default: $TMPDIR)")
    ap.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    ap.add_argument("--timeout", type=float, default=2900, help="seconds for all four steps together")
    a = ap.parse_args()
    root = os.path.abspath(a.root)

    head = subprocess.run(["git", "-C", root, "rev-parse", "--verify", "HEAD^{commit}"],
                          capture_output=True, text=True)
    if head.returncode != 0:
        print(f"skipped: {root} is not a git checkout with a commit ({head.stderr.strip()})")
        return SKIP
    sha = head.stdout.strip()
    dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout
    print(f"testing commit {sha} of {root}" + (" (its uncommitted changes are not tested)" if dirty else ""))

    expected = json.load(open(os.path.join(root, "testdata/t113/lightning.expected.json")))["totals"]
    want = {"Trainable params": expected["trainable"], "Non-trainable params": expected["non_trainable"],
            "Total params": expected["parameters"], "Buffers": expected["buffers"]}

    if a.work:
        os.makedirs(a.work, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="readme_order.", dir=a.work)
    clone = os.path.join(tmp, "ckpt")
    # No make jobserver or flags from a parent build: the scripts choose their own -j.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    deadline = time.monotonic() + a.timeout
    times = []

    def step(name, cmd):
        left = deadline - time.monotonic()
        t0 = time.monotonic()
        # Its own process group, so that a timeout also stops make and the compilers under it.
        p = subprocess.Popen(cmd, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
        try:
            out, err = p.communicate(timeout=max(left, 1))
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            rc, err = None, err + f"\ntimed out after {left:.0f} s (--timeout {a.timeout:.0f})"
        dt = time.monotonic() - t0
        times.append((name, dt))
        print(f"{name}: exit {rc}, {dt:.1f} s", flush=True)
        expect(f"{name}: exit 0", rc == 0, f"stdout:\n{tail(out)}\nstderr:\n{tail(err)}")
        return rc, out

    try:
        t0 = time.monotonic()
        subprocess.run(["git", "clone", "--quiet", "--no-checkout", root, clone], check=True)
        subprocess.run(["git", "-C", clone, "checkout", "--quiet", "--detach", sha], check=True)
        print(f"git clone: {time.monotonic() - t0:.1f} s, in {clone}", flush=True)
        torch_tests = torch_tests_in(os.path.join(clone, "tests/CMakeLists.txt"))
        expect(f"tests/CMakeLists.txt adds {TORCH_TESTS} under if(TARGET ckpt-torch)",
               set(TORCH_TESTS) <= set(torch_tests), f"found {torch_tests}")
        torch_tests = sorted(set(torch_tests) | set(TORCH_TESTS))

        def example(name, first=None):
            rc, out = step(name, ["scripts/example.sh"])
            if rc != 0:
                return out
            expect(f"{name}: shows testdata/t113/lightning.ckpt",
                   re.search(r"^File:\s+testdata/t113/lightning\.ckpt ", out, re.M), out)
            expect(f"{name}: shows the module table",
                   re.search(r"^\s*\|\s*Name\s+\|\s*Type\s+\|\s*Params", out, re.M), out)
            got = summary_totals(out)
            expect(f"{name}: the totals are PyTorch's ({want})", got == want, f"got {got}\n{out}")
            if first is not None:
                expect(f"{name}: the same stdout as the first run", out == first, f"first:\n{first}\nthen:\n{out}")
            return out

        def test_list(name):
            rc, out = step(name, ["scripts/test.sh", "-N"])
            expect(f"{name}: build/ckpt-torch was built", os.access(os.path.join(clone, "build/ckpt-torch"), os.X_OK))
            listed = listed_tests(out)
            missing = [t for t in torch_tests if t not in listed]
            expect(f"{name}: the LibTorch tests are listed ({', '.join(torch_tests)})", listed and not missing,
                   f"missing {missing} from the {len(listed)} tests listed:\n{tail(out, 20)}")
            print(f"  {len(listed)} tests listed; LibTorch ones: {[t for t in torch_tests if t in listed]}", flush=True)

        first = example("1 scripts/example.sh (fresh clone)")
        expect("after example.sh on a fresh clone, build/ has no ckpt-torch (built without LibTorch)",
               not os.path.exists(os.path.join(clone, "build/ckpt-torch")))
        test_list("2 scripts/test.sh -N (after example.sh)")
        example("3 scripts/example.sh (after test.sh)", first)
        test_list("4 scripts/test.sh -N (after example.sh again)")
    finally:
        total = sum(dt for _, dt in times)
        print("times: " + ", ".join(f"{n.split(' ', 1)[0]}. {dt:.0f} s" for n, dt in times) + f"; steps {total:.0f} s")
        if a.keep:
            print(f"kept {clone}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("readme order: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
