#!/usr/bin/env python3
"""Timing helper for bench/run.sh (standard library only, no torch).

  measure.py run TSV FILE_LABEL ROW_LABEL RUNS WARMUP -- CMD ARGS...
      Runs CMD once under /usr/bin/time for its peak RSS (untimed; it also warms the page cache),
      then WARMUP more times untimed, then RUNS times timed, each with stdout to /dev/null, and
      appends one row to TSV: labels, status, best and median wall seconds, peak RSS in KiB.
      On failure the row says so with the last line of stderr, and the exit status is non-zero.

      With COLD=1 in the environment, the page cache is dropped (sync; echo 3 >
      /proc/sys/vm/drop_caches: root only) before every run, so the peak RSS and the times are the
      cold-cache ones; without the right to drop it, the row says so.

  measure.py table TSV
      Prints the table and the DESIGN.md section 7 goals for ckpt summary.

  measure.py pairs TSV [FILE_LABEL ROW_A ROW_B]...
      Prints TSV's rows (best and median wall seconds, peak RSS), then for each triple ROW_A / ROW_B on
      FILE_LABEL: the ratio of the medians and of the bests, both from this one run (bench/run.sh's
      peers: ckpt against torch 2.15 and safetensors).

Wall time is perf_counter around spawn-to-reap, so it includes process start-up: that is what a
user waits for, and what each row pays (Python's interpreter start-up, torch's import).
"""
import os
import statistics
import subprocess
import sys
import tempfile
import time

GOAL_RATIO = 1.0 / 3.0  # ckpt summary time / py_unpickler time
GOAL_RSS_MIB = 20.0
CKPT_ROW = "ckpt summary --json"
COLD_SUFFIX = " [cold cache]"
BASE_ROW = "py_unpickler"


TIME = "/usr/bin/time"


def drop_page_cache():
    """True when the page cache was dropped (root), so the next run reads the file from the disk."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def run_once(cmd):
    if os.environ.get("COLD") == "1":
        drop_page_cache()
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    p.stderr.close()
    return wall, ru.ru_maxrss, p.returncode, err.decode("utf-8", "replace")


def rss_once(cmd):
    """Peak RSS in KiB as GNU time reports it, or None without /usr/bin/time.

    Not wait4 from here: Linux folds the spawning process's own high-water RSS into the child's
    ru_maxrss at exec, so a child of this ~14 MiB Python would never read below ~14 MiB. GNU time
    is a ~1 MiB spawner, like the conventional `/usr/bin/time -f %M` figure.
    """
    if not os.access(TIME, os.X_OK):
        return None
    fd, out = tempfile.mkstemp(prefix="ckpt-bench-rss.")
    os.close(fd)
    try:
        _, _, rc, err = run_once([TIME, "-q", "-f", "%M", "-o", out] + cmd)
        with open(out) as f:
            text = f.read().strip().splitlines()
        return rc, (int(text[-1]) if text and text[-1].isdigit() else None), err
    finally:
        os.unlink(out)


def fail(tsv, file_label, row_label, rc, err):
    last = (err.strip().splitlines() or ["(no stderr)"])[-1]
    with open(tsv, "a") as f:
        f.write("\t".join([file_label, row_label, "failed", "", "", "", "exit %d: %s" % (rc, last)]) + "\n")
    sys.stderr.write("  %s on %s failed (exit %d):\n%s\n" % (row_label, file_label, rc, err[-2000:]))
    return 1


def cmd_run(argv):
    tsv, file_label, row_label, runs, warmup = argv[:5]
    if argv[5] != "--":
        sys.exit("measure.py run: expected -- before the command")
    cmd = argv[6:]
    runs, warmup = int(runs), int(warmup)
    cold = os.environ.get("COLD") == "1"
    if cold and not drop_page_cache():
        return fail(tsv, file_label, row_label, 1, "cannot drop the page cache (needs root): no cold-cache figures")
    # First, one untimed run under GNU time for the peak RSS; it also warms the page cache (COLD: the
    # cache was just dropped, so this is the cold-cache peak).
    rss, note = None, ""
    r = rss_once(cmd)
    if r is not None:
        rc, rss, err = r
        if rc != 0:
            return fail(tsv, file_label, row_label, rc, err)
    walls, wait4_rss = [], 0
    for i in range(warmup + runs):
        wall, maxrss, rc, err = run_once(cmd)
        if rc != 0:
            return fail(tsv, file_label, row_label, rc, err)
        if i >= warmup:
            walls.append(wall)
            wait4_rss = max(wait4_rss, maxrss)
    if rss is None:
        rss, note = wait4_rss, "peak RSS from wait4 (includes the spawner's ~14 MiB)"
    with open(tsv, "a") as f:
        f.write("\t".join([file_label, row_label, "ok", "%.4f" % min(walls), "%.4f" % statistics.median(walls),
                           str(rss), note]) + "\n")
    return 0


def cmd_table(argv):
    rows = [line.rstrip("\n").split("\t") for line in open(argv[0]) if line.strip()]
    files = []
    for r in rows:
        if r[0] not in files:
            files.append(r[0])
    head = "%-16s %-46s %9s %9s %9s %11s" % ("file", "command", "best s", "median s", "peak MiB", "ckpt/this")
    print(head)
    print("-" * len(head))
    goals = []
    for fl in files:
        fr = [r for r in rows if r[0] == fl]
        ck = next((r for r in fr if r[1] == CKPT_ROW and r[2] == "ok"), None)
        ck_cold = next((r for r in fr if r[1] == CKPT_ROW + COLD_SUFFIX and r[2] == "ok"), None)
        for r in fr:
            if r[2] != "ok":
                print("%-16s %-46s %s" % (fl, r[1], r[6]))
                continue
            mine = ck_cold if r[1].endswith(COLD_SUFFIX) else ck  # cold rows against the cold ckpt row
            ratio = "%11.3g" % (float(mine[3]) / float(r[3])) if mine and r is not mine else "%11s" % ""
            print("%-16s %-46s %9.4f %9.4f %9.1f %s%s" % (fl, r[1], float(r[3]), float(r[4]), int(r[5]) / 1024.0,
                                                         ratio, "  (%s)" % r[6] if r[6] else ""))
        base = next((r for r in fr if r[1] == BASE_ROW and r[2] == "ok"), None)
        if ck and base:
            ratio = float(ck[3]) / float(base[3])
            mib = int(ck[5]) / 1024.0
            goals.append("%s: ckpt/py_unpickler time %.3f (goal <= %.3f) %s; ckpt peak RSS %.1f MiB (goal <= %.0f) %s"
                         % (fl, ratio, GOAL_RATIO, "PASS" if ratio <= GOAL_RATIO else "FAIL",
                            mib, GOAL_RSS_MIB, "PASS" if mib <= GOAL_RSS_MIB else "FAIL"))
        if ck_cold:
            mib = int(ck_cold[5]) / 1024.0
            goals.append("%s: ckpt peak RSS with the page cache cold %.1f MiB (goal <= %.0f) %s"
                         % (fl, mib, GOAL_RSS_MIB, "PASS" if mib <= GOAL_RSS_MIB else "FAIL"))
        if not ck and fl != "(none)":
            goals.append("%s: no ckpt figures (not built, or it failed): goals not checked" % fl)
    print()
    print("Goals (DESIGN.md section 7): ckpt summary <= 1/3 of py_unpickler's time, <= %.0f MiB peak RSS"
          % GOAL_RSS_MIB)
    for g in goals:
        print("  " + g)
    return 0


def cmd_pairs(argv):
    rows = [line.rstrip("\n").split("\t") for line in open(argv[0]) if line.strip()]
    trip = [argv[i:i + 3] for i in range(1, len(argv) - 2, 3)]
    wf = max([len("file")] + [len(r[0]) for r in rows])
    wc = max([len("command (whole process)")] + [len(r[1]) for r in rows])
    head = "%-*s  %-*s %8s %9s %9s" % (wf, "file", wc, "command (whole process)", "best s", "median s", "peak MiB")
    print(head)
    print("-" * len(head))
    for r in rows:
        if r[2] != "ok":
            print("%-*s  %-*s %s" % (wf, r[0], wc, r[1], r[6]))
        else:
            print("%-*s  %-*s %8.3f %9.3f %9.1f" % (wf, r[0], wc, r[1], float(r[3]), float(r[4]), int(r[5]) / 1024.0))
    print()
    names = ["%s / %s" % (a, b) for _, a, b in trip]
    wn = max([len("ratio (this run)")] + [len(n) for n in names])
    print("%-*s  %-*s %8s %8s" % (wf, "file", wn, "ratio (this run)", "medians", "bests"))
    for (fl, a, b), name in zip(trip, names):
        ra = next((r for r in rows if r[0] == fl and r[1] == a and r[2] == "ok"), None)
        rb = next((r for r in rows if r[0] == fl and r[1] == b and r[2] == "ok"), None)
        if ra and rb:
            print("%-*s  %-*s %8.3f %8.3f" % (wf, fl, wn, name, float(ra[4]) / float(rb[4]), float(ra[3]) / float(rb[3])))
        else:
            print("%-*s  %-*s %s" % (wf, fl, wn, name, "not measured (a row failed or is missing)"))
    return 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "run" and len(sys.argv) >= 9:
        return cmd_run(sys.argv[2:])
    if len(sys.argv) >= 3 and sys.argv[1] == "pairs":
        return cmd_pairs(sys.argv[2:])
    if len(sys.argv) == 3 and sys.argv[1] == "table":
        return cmd_table(sys.argv[2:])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
