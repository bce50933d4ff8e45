#!/usr/bin/env python3
"""Detection and false-positive rates of `ckpt check` on the security corpus (testdata/security/).

    bench/security.py [--ckpt build/ckpt] [--runs 3] [--markdown] [--misses]

Runs `ckpt check --json FILE` (default --fail-on error) on every file of
testdata/security/expected.json, whose verdicts come from Python itself (gen_security.py's oracle:
what torch.load(weights_only=False) / pickle.load would call), and prints:

- detection rate: malicious files (a non-allowlisted global is called or built), dangerous-reference
  files (a denylisted global handed to the loader uncalled) and tampered files (the pickle writes into a
  tensor) with exit status 1, over all of them; how many of those also name every expected global (`must_name`) in a
  dangerous-global finding; and the rate over attack files alone (the malicious verdict also covers
  real torch.save outputs of a user-defined nn.Module class, which the rule counts as dangerous);
- false-positive rate: benign files (verdict clean or referenced-only) with exit status 1, over all
  benign files; beside it, how many of them ckpt could not read (exit 3);
- apart, because the rule allows either answer: extras-only files (only vetted-extra candidates such
  as argparse.Namespace or torch.nn.modules.* are called) and dormant files (a payload in a pickle
  torch never unpickles) flagged; and refused files (torch.load refuses them) by exit status;
- the same detection rate per family (generated files) and per source (public / re-created);
- the time: the sum over files of the best of --runs wall times, and the median and slowest file.

`--misses` lists the malicious files not caught and the benign files flagged.

Peers (issue 39): `--peers` [--python PATH] [--tools LIST] [--timeout 60] [--cli-check N] [--peers-tsv PATH]
runs the public pickle scanners of the truth environment (its Python is `scripts/truth-env.sh --print`,
or --python; without either the script says the environment is absent and stops) on every file of the
same corpus, and prints one table beside ckpt's: malicious caught (of malicious + dangerous-reference +
tampered, as above), benign flagged (clean + referenced-only), errors (documented error exits and
tracebacks, split malicious / benign / either-answer files), timeouts, files the tool does not scan, the
time; then what a gate on the exit status alone sees. Files are scanned in a temporary working directory
with CKPT_SENTINEL set (no scanner may run a payload: the script stops if the sentinel appears),
CUDA_VISIBLE_DEVICES="", PROMPTFOO_DISABLE_TELEMETRY=1 and HF_HUB_OFFLINE=1.

How each tool is run, and how its verdict is read (from its source in the truth environment):

- picklescan 1.0.5, `picklescan -p FILE` (and `--strict`, its default-deny mode, as a second row). Its
  exit status is 0 clean, 1 dangerous globals, 2 a scan error (a pickle that fails to parse after some
  globals were read, or an unhandled exception); 2 wins over 1. Flagged: its summary's "Infected files: 1"
  (a global on its denylist, or promoted by --strict), whatever the status. Error: status 2.
- fickling 0.1.12, `fickling --check-safety FILE`: 0 likely safe, 1 a severity above LIKELY_SAFE, 2 a
  parse failure (every torch.save zip: the command reads the file as one raw pickle stream). Flagged:
  status 1. Error: status 2, or an uncaught exception (the command dies with a traceback, exit 1: a gate
  on the status sees 1, this table counts an error, not a catch).
  "fickling, zip-aware" is fickling's own per-file dispatch of `fickling --hf REPO` (fickling/cli.py
  _scan_huggingface) applied to a local file: a zip (torch.save or any) goes to scan_zip_archive (its
  .pkl / .pickle / .bin members), a pickle to scan_file, anything else is not scanned. Flagged: any
  result not is_safe (the --hf exit status 1; a member that fails to parse counts as SUSPICIOUS, so as
  flagged). Error: any result with errors.
- modelscan 0.8.8, `modelscan -p FILE -r json -o OUT`: 0 clean, 1 issues, 2 scan errors (wins over 1),
  3 nothing it supports (by extension and format), 4 usage. Flagged: any issue in the JSON report (any
  severity: the status is 1 on any). Error: status 2 or 4. Status 3: "not scanned".
- modelaudit 0.2.54, `modelaudit scan --format json --output OUT --no-cache FILE...`: 0 no finding, 1 a
  WARNING or CRITICAL issue or failed check, 2 an operational error (wins over 1), or coverage
  inconclusive without a finding, or nothing scanned. Flagged: a WARNING / CRITICAL issue or failed check
  located in the file (modelaudit's own location rule: the path, then nothing or one of `: #([/`).
  Error: the per-file status by that same rule (core_results.determine_exit_code) is 2.

picklescan, fickling and modelscan run in one Python process per tool that calls the command's own
entry point (the console script's main, sys.argv set as on the command line) on each file in turn:
the verdict is the command's, its start-up is paid once (the table gives it, and one real process on a
32-byte pickle). --cli-check N runs the real commands on N files per tool and compares the status. A
file that runs past --timeout kills that process (a timeout), and the next file starts a new one.
modelaudit runs as real processes, 25 files each (its multi-path command line): called again in one
process it carried state from one scan into the next (a clean torch.save flagged after a malicious
file). A batch past 60 s + 10 s a file is killed and its files run one a process (60 s + --timeout each).
Time: wall seconds of everything a tool ran, and its CPU seconds (user + system of its processes), which
other work on the machine does not inflate. ckpt's row: one `ckpt check --json FILE` process per file,
exit 1 flagged, any other non-zero status an error (3: could not read it).
"""

import argparse
import collections
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def group_of(rel, e):
    if e["made_as"] == "benign":  # a real torch.save of a user class: the rule calls it dangerous
        return e["source"] + " (benign save, user class built)"
    if rel.startswith("gen/"):
        return "generated: " + e["family"].split(":")[0]
    return e["source"]


def pct(a, b):
    return "%d/%d (%.1f %%)" % (a, b, 100.0 * a / b) if b else "0/0"


# ---------------------------------------------------------------------------------------------------------
# Peers: the public pickle scanners of the truth environment on the same files (--peers).

PEER_TOOLS = collections.OrderedDict([
    # id: (label, package, how it is run)
    ("picklescan", ("picklescan", "picklescan", "`picklescan -p FILE`, in one process")),
    ("picklescan-strict", ("picklescan --strict", "picklescan", "`picklescan --strict -p FILE`, in one process")),
    ("fickling", ("fickling", "fickling", "`fickling --check-safety FILE`, in one process")),
    ("fickling-api", ("fickling, zip-aware", "fickling",
                      "its --hf per-file dispatch (scan_zip_archive / scan_file) on local files, in one process")),
    ("modelscan", ("modelscan", "modelscan", "`modelscan -p FILE -r json -o OUT`, in one process")),
    ("modelaudit", ("modelaudit", "modelaudit", "`modelaudit scan --format json --output OUT --no-cache FILE...`, "
                    "real processes, %d files each" % 25)),
])
MODELAUDIT_BATCH = 25
TINY = "public/picklescan/tests/data/benign0_v3.pkl"  # a 32-byte benign pickle: a CLI's cost per process


def peer_driver(tool):
    """--peer-driver TOOL (under the truth environment's Python): reads one path a line on stdin, runs the
    tool's own command-line entry point on it in this process and writes one JSON line per file on the
    original stdout: rc (the exit status the command would have), flagged, error, seconds, note."""
    import contextlib
    import io
    import logging
    import re
    import traceback
    from importlib import metadata
    res = os.fdopen(os.dup(1), "w", buffering=1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # anything a tool writes to the descriptors themselves is dropped
    t0 = time.perf_counter()
    pkg = PEER_TOOLS[tool][1]
    out_json = os.path.join(os.getcwd(), "peer-%s.json" % tool)
    if pkg == "picklescan":
        from picklescan.cli import main as entry
    elif tool == "fickling":
        from fickling.__main__ import main as entry
    elif tool == "fickling-api":
        from pathlib import PurePosixPath
        from fickling.cli import HF_RAW_PICKLE_EXTENSIONS, HF_ZIP_PICKLE_EXTENSIONS
        from fickling.loader import scan_file, scan_zip_archive
        from fickling.polyglot import find_file_properties
    elif tool == "modelscan":
        from modelscan.cli import main as entry
    else:
        sys.exit("no in-process driver for %s" % tool)
    res.write(json.dumps({"ready": time.perf_counter() - t0, "version": metadata.version(pkg)}) + "\n")

    def one(path):
        """(rc, flagged, error, note) as the command would see them."""
        if pkg == "picklescan":
            logging.getLogger("picklescan").handlers.clear()  # main() adds one per call
            sys.argv = ["picklescan"] + (["--strict"] if tool == "picklescan-strict" else []) + ["-p", path]
            rc = entry()
            text = sys.stdout.getvalue()
            m = re.search(r"Infected files: (\d+)", text)
            note = "unhandled exception" if "Unhandled exception" in text else ""
            return rc, bool(m and int(m.group(1)) > 0), rc == 2, note
        if tool == "fickling":
            sys.argv = ["fickling", "--check-safety", "--json-output", out_json, path]
            rc = entry()
            return rc, rc == 1, rc == 2, ""
        if tool == "fickling-api":  # fickling/cli.py _scan_huggingface, for one local file
            ext = PurePosixPath(path).suffix.lower()
            props = find_file_properties(path)
            if props["is_torch_zip"] or props["is_standard_zip"] or ext in HF_ZIP_PICKLE_EXTENSIONS:
                results = list(scan_zip_archive(path, graceful=True, json_output_path=out_json).values())
            elif props["is_valid_pickle"] or ext in HF_RAW_PICKLE_EXTENSIONS:
                results = [scan_file(path, graceful=True, json_output_path=out_json)]
            else:
                return 0, False, False, "not scanned"
            flagged = any(not r.is_safe for r in results)
            return (1 if flagged else 0), flagged, any(r.errors for r in results), ""
        # modelscan
        logging.getLogger("modelscan").handlers.clear()
        if os.path.exists(out_json):
            os.unlink(out_json)
        sys.argv = ["modelscan", "-p", path, "-r", "json", "-o", out_json]
        rc = None
        try:
            entry()
        except SystemExit as e:
            rc = e.code
        try:
            with open(out_json) as f:
                issues = len(json.load(f).get("issues") or [])
        except (OSError, ValueError):
            issues = 0
        return rc, issues > 0, rc in (2, 4), ("not scanned" if rc == 3 else "")

    for line in sys.stdin:
        path = line.rstrip("\n")
        buf = io.StringIO()
        t = time.perf_counter()
        r = {"rc": None, "flagged": False, "error": False, "note": ""}
        try:
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                try:
                    rc, flagged, error, note = one(path)
                except SystemExit as e:  # a command that exits instead of returning
                    rc, flagged, error, note = e.code, e.code == 1, e.code not in (0, 1), "exit"
            r.update(rc=rc, flagged=bool(flagged), error=bool(error), note=note)
        except BaseException:  # uncaught: the command would die with this traceback (exit 1)
            r.update(rc=1, error=True, note="traceback: " + traceback.format_exc().strip().splitlines()[-1][:200])
        r["seconds"] = time.perf_counter() - t
        res.write(json.dumps(r) + "\n")


class PeerDriver:
    """A --peer-driver process; scan() enforces the per-file timeout by killing it (the next file starts a new one)."""

    def __init__(self, py, tool, env, cwd):
        self.py, self.tool, self.env, self.cwd = py, tool, env, cwd
        self.p, self.version, self.ready, self.starts = None, None, 0.0, 0

    def start(self):
        self.p = subprocess.Popen([self.py, os.path.abspath(__file__), "--peer-driver", self.tool],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(os.path.join(self.cwd, "driver-%s.log" % self.tool), "ab"),
                                  cwd=self.cwd, env=self.env, start_new_session=True)
        line = self.read(300)
        if line is None or "ready" not in line:
            self.stop()
            raise RuntimeError("%s: the driver did not start (see %s)" % (self.tool, os.path.join(self.cwd, "driver-%s.log" % self.tool)))
        self.version, self.ready, self.starts = line["version"], self.ready + line["ready"], self.starts + 1

    def read(self, timeout):
        import select
        if not select.select([self.p.stdout], [], [], timeout)[0]:
            return None
        line = self.p.stdout.readline()
        return json.loads(line) if line else None

    def stop(self):
        if self.p:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except OSError:
                pass
            self.p.wait()
            self.p = None

    def scan(self, path, timeout):
        if self.p is None:
            self.start()
        self.p.stdin.write((path + "\n").encode())
        self.p.stdin.flush()
        r = self.read(timeout)
        if r is None:  # timed out, or the process died
            died = self.p.poll() is not None
            self.stop()
            return {"rc": None, "flagged": False, "error": True, "seconds": float(timeout),
                    "note": "driver died" if died else "timeout", "timeout": not died}
        return r


def loc_matches(location, path):
    """modelaudit's own rule (core_results._location_matches_file_path): the path, then nothing or a separator."""
    if not location or not location.startswith(path):
        return False
    return location[len(path):][:1] in ("", ":", " ", "#", "(", "[", os.sep)


def modelaudit_verdicts(doc, paths):
    """Per-file verdicts from one multi-file modelaudit report, by the rule of its exit status
    (core_results.determine_exit_code): 2 on an operational error, else 1 on a WARNING / CRITICAL issue or
    failed check, else 2 when the file's coverage is inconclusive (or it was not scanned), else 0."""
    records = (doc.get("issues") or []) + [c for c in (doc.get("checks") or []) if c.get("status") == "failed"]
    meta_all = doc.get("file_metadata") or {}
    out = {}
    for path in paths:
        mine = [r for r in records
                if loc_matches(r.get("location") or "", path)
                or (r.get("details") or {}).get("pickle_source") == path]
        flagged = any(str(r.get("severity") or "").lower() in ("warning", "critical") for r in mine)
        meta = meta_all.get(path)
        operr = bool(meta and meta.get("operational_error"))
        inconclusive = meta is None or "inconclusive" in (meta.get("scan_outcome"), meta.get("pickle_report_status"))
        rc = 2 if operr else 1 if flagged else 2 if inconclusive else 0
        note = "operational error" if operr else "not scanned" if meta is None else "inconclusive" if inconclusive else ""
        out[path] = {"rc": rc, "flagged": flagged, "error": rc == 2, "note": note}
    return out


def run_modelaudit(py, paths, env, cwd, timeout, log):
    """modelaudit over PATHS in batches (its multi-path command line); a batch over its deadline is killed and
    its files are run one per process, each with the per-file timeout plus 60 s of start-up."""
    exe = os.path.join(os.path.dirname(py), "modelaudit")
    res, wall = {}, 0.0

    def batch(group, deadline):
        out = os.path.join(cwd, "modelaudit.json")
        if os.path.exists(out):
            os.unlink(out)
        t0 = time.perf_counter()
        try:
            p = subprocess.run([exe, "scan", "--format", "json", "--output", out, "--no-cache"] + group, cwd=cwd,
                               env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=deadline, start_new_session=True)
        except subprocess.TimeoutExpired:
            return time.perf_counter() - t0, None, None
        dt = time.perf_counter() - t0
        try:
            with open(out) as f:
                return dt, p.returncode, json.load(f)
        except (OSError, ValueError):
            return dt, p.returncode, {"_stderr": p.stderr.decode("utf-8", "replace")[-300:]}

    for i in range(0, len(paths), MODELAUDIT_BATCH):
        group = paths[i:i + MODELAUDIT_BATCH]
        log("  modelaudit: files %d-%d of %d" % (i + 1, i + len(group), len(paths)))
        dt, rc, doc = batch(group, 60 + 10 * len(group))
        wall += dt
        if doc is None or "_stderr" in doc:  # over the deadline, or no report: one process per file
            for path in group:
                dt, rc, doc = batch([path], 60 + timeout)
                wall += dt
                if doc is None:
                    res[path] = {"rc": None, "flagged": False, "error": True, "note": "timeout", "timeout": True}
                elif "_stderr" in doc:
                    res[path] = {"rc": rc, "flagged": False, "error": True, "note": "no report: " + doc["_stderr"].strip().splitlines()[-1:][0] if doc["_stderr"].strip() else "no report"}
                else:
                    res.update(modelaudit_verdicts(doc, [path]))
        else:
            res.update(modelaudit_verdicts(doc, group))
    return res, wall


def cli_command(py, tool, path, cwd):
    b = os.path.dirname(py)
    return {"picklescan": [os.path.join(b, "picklescan"), "-p", path],
            "picklescan-strict": [os.path.join(b, "picklescan"), "--strict", "-p", path],
            "fickling": [os.path.join(b, "fickling"), "--check-safety", "--json-output",
                         os.path.join(cwd, "cli-fickling.json"), path],
            "modelscan": [os.path.join(b, "modelscan"), "-p", path, "-r", "json", "-o", os.path.join(cwd, "cli-modelscan.json")],
            "modelaudit": [os.path.join(b, "modelaudit"), "scan", "--format", "json", "--output",
                           os.path.join(cwd, "cli-modelaudit.json"), "--no-cache", path]}.get(tool)


def timed_cli(cmd, env, cwd, timeout):
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=timeout)
        return time.perf_counter() - t0, p.returncode
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, None


def truth_python(arg, root):
    if arg:
        if not os.access(arg, os.X_OK):
            sys.exit("bench/security.py: --python %s is not an executable" % arg)
        return os.path.abspath(arg)  # not resolved: a venv's python is a link to the base interpreter
    script = os.path.join(root, "scripts", "truth-env.sh")
    p = subprocess.run([script, "--print"], capture_output=True, text=True) if os.access(script, os.X_OK) else None
    if p is None or p.returncode != 0 or not p.stdout.strip():
        sys.exit("bench/security.py --peers: the truth environment is absent (`scripts/truth-env.sh --print` found "
                 "none). Make it with scripts/truth-env.sh, or pass --python PATH: a Python with picklescan, "
                 "modelscan, fickling and modelaudit (console scripts beside it).")
    return p.stdout.strip().splitlines()[-1]


def peer_versions(py):
    code = ("import json, importlib.metadata as m\nv = {}\nfor p in %r:\n    try: v[p] = m.version(p)\n"
            "    except Exception: v[p] = None\nprint(json.dumps(v))" % (["picklescan", "fickling", "modelscan", "modelaudit", "torch"],))
    p = subprocess.run([py, "-c", code], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench/security.py: %s could not run: %s" % (py, p.stderr.strip()[-300:]))
    return json.loads(p.stdout)


def run_peers(a, sec, files, ckpt_rows, table, py):
    versions = peer_versions(py)
    tools = [t.strip() for t in a.tools.split(",")] if a.tools else list(PEER_TOOLS)
    for t in tools:
        if t not in PEER_TOOLS:
            sys.exit("bench/security.py: unknown tool %r (known: %s)" % (t, ", ".join(PEER_TOOLS)))
    missing = [t for t in tools if not versions.get(PEER_TOOLS[t][1])]
    if missing:
        sys.exit("bench/security.py: %s lacks %s" % (py, ", ".join(sorted({PEER_TOOLS[t][1] for t in missing}))))
    rels = list(files)
    paths = [os.path.join(sec, r) for r in rels]
    log = lambda m: sys.stderr.write(m + "\n")
    results = {}   # tool -> {rel: verdict}
    walls, starts, clis, cpus = {}, {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-peers-") as tmp:
        sentinels = [os.path.join(tmp, "sentinel"), os.path.join(tmp, "ckpt-sentinel")]
        env = dict(os.environ, CKPT_SENTINEL=sentinels[0], NO_COLOR="1", TERM="dumb", CUDA_VISIBLE_DEVICES="",
                   PROMPTFOO_DISABLE_TELEMETRY="1", HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
        def cpu():  # user + system seconds of every reaped child: what the tool cost, whatever else ran
            ru = resource.getrusage(resource.RUSAGE_CHILDREN)
            return ru.ru_utime + ru.ru_stime

        for tool in tools:
            log("bench/security.py: %s on %d files" % (tool, len(paths)))
            t0, c0 = time.perf_counter(), cpu()
            if tool == "modelaudit":
                res, wall = run_modelaudit(py, paths, env, tmp, a.timeout, log)
                results[tool] = {r: res[p] for r, p in zip(rels, paths)}
                walls[tool], starts[tool] = wall, None
                cpus[tool] = cpu() - c0
            else:
                d = PeerDriver(py, tool, env, tmp)
                res = {}
                try:
                    for r, p in zip(rels, paths):
                        res[r] = d.scan(p, a.timeout)
                finally:
                    d.stop()
                results[tool] = res
                walls[tool], starts[tool] = time.perf_counter() - t0, (d.ready / max(1, d.starts), d.starts)
            cpus[tool] = cpu() - c0
            if tool in ("picklescan", "fickling", "modelscan", "modelaudit"):
                cmd = cli_command(py, tool, os.path.join(sec, TINY), tmp)
                clis[tool] = statistics.median(timed_cli(cmd, env, tmp, 120)[0] for _ in range(3))
            for s in sentinels:
                if os.path.exists(s):
                    sys.exit("bench/security.py: THE SENTINEL WAS CREATED while %s ran" % tool)
        ckpt_tiny = statistics.median(timed_cli([a.ckpt_abs, "check", os.path.join(sec, TINY)], env, tmp, 60)[0] for _ in range(3))
        checks = {}
        if a.cli_check:
            for tool in tools:
                if cli_command(py, tool, "", tmp) is None:
                    continue
                step = max(1, len(rels) // a.cli_check)
                agree, differ = 0, []
                for r in rels[::step][:a.cli_check]:
                    _, rc = timed_cli(cli_command(py, tool, os.path.join(sec, r), tmp), env, tmp, a.timeout + 60)
                    mine = results[tool][r]["rc"]
                    if rc == mine:
                        agree += 1
                    else:
                        differ.append("%s (cli %s, here %s)" % (r, rc, mine))
                checks[tool] = (agree, differ)

    # Tables: the ckpt row first (from the run above: exit 1 flagged; exit 3 "could not read" and anything but
    # 0 / 1 counted as errors), then each tool.
    ck = {r[0]: {"rc": r[2], "flagged": r[2] == 1, "error": r[2] not in (0, 1),
                 "timeout": r[2] is None, "seconds": r[3]} for r in ckpt_rows}
    groups = {"mal": ("malicious", "dangerous-reference", "tampered"), "ben": ("clean", "referenced-only"),
              "either": ("extras-only", "dormant", "refused")}
    sel = {g: [r for r in rels if files[r]["verdict"] in v] for g, v in groups.items()}
    rows, rows2 = [], []
    for tool in ["ckpt"] + tools:
        res = ck if tool == "ckpt" else results[tool]
        errs = {g: sum(bool(res[r].get("error")) and not res[r].get("timeout") for r in v) for g, v in sel.items()}
        touts = [r for r in rels if res[r].get("timeout")]
        notsc = [r for r in rels if res[r].get("note") == "not scanned"]
        secs = [res[r]["seconds"] for r in rels if "seconds" in res[r]]
        if tool == "ckpt":
            label = "ckpt check (%s)" % a.ckpt_version
            how = "`ckpt check --json FILE`, one process per file, best of %d" % a.runs
            tm = "%.2f s (one process per file)" % sum(secs)
            tiny = ckpt_tiny
        else:
            label = "%s %s" % (PEER_TOOLS[tool][0], versions[PEER_TOOLS[tool][1]])
            how = PEER_TOOLS[tool][2]
            if tool == "modelaudit":
                tm = "%.1f s, CPU %.1f s (%d processes)" % (walls[tool], cpus[tool],
                                                          (len(rels) + MODELAUDIT_BATCH - 1) // MODELAUDIT_BATCH)
            else:
                tm = "%.1f s, CPU %.1f s (start-up %.2f s%s; scans %.1f s, median %.1f ms)" % (
                    walls[tool], cpus[tool], starts[tool][0], " x%d" % starts[tool][1] if starts[tool][1] > 1 else "",
                    sum(secs), 1000 * statistics.median(secs) if secs else 0)
            tiny = clis.get(tool)
        rows.append([label,
                     pct(sum(res[r]["flagged"] for r in sel["mal"]), len(sel["mal"])),
                     pct(sum(res[r]["flagged"] for r in sel["ben"]), len(sel["ben"])),
                     "%d / %d / %d" % (errs["mal"], errs["ben"], errs["either"]), "%d" % len(touts),
                     "%d" % len(notsc), tm,
                     "%.2f s" % tiny if tiny is not None else "-"])
        rows2.append([label, how,
                      pct(sum(res[r]["rc"] not in (0, None) or res[r].get("timeout", False) for r in sel["mal"]), len(sel["mal"])),
                      pct(sum(res[r]["rc"] not in (0, None) or res[r].get("timeout", False) for r in sel["ben"]), len(sel["ben"])),
                      "%d/%d" % (sum(res[r]["flagged"] for r in sel["either"]), len(sel["either"]))])
    print("peers: %s (torch %s); per-file timeout %d s; %d files: malicious %d (malicious + dangerous-reference + "
          "tampered), benign %d (clean + referenced-only), either answer allowed %d (extras-only, dormant, refused)\n"
          % (py, versions.get("torch"), a.timeout, len(rels), len(sel["mal"]), len(sel["ben"]), len(sel["either"])))
    table(["tool", "malicious caught", "benign flagged", "errors: malicious / benign / either", "timeouts",
           "not scanned", "time (all files)",
           "one process, 32-byte pickle"], rows)
    table(["tool", "how run", "malicious: exit != 0", "benign: exit != 0", "either allowed: flagged"], rows2)
    for tool, (agree, differ) in checks.items():
        print("cli check %s: %d/%d files give the in-process exit status%s" % (
            tool, agree, agree + len(differ), (": differ " + "; ".join(differ)) if differ else ""))
    if a.peers_tsv:
        with open(a.peers_tsv, "w") as f:
            f.write("file\tverdict\ttool\trc\tflagged\terror\tnote\tseconds\n")
            for tool in ["ckpt"] + tools:
                res = ck if tool == "ckpt" else results[tool]
                for r in rels:
                    v = res[r]
                    f.write("\t".join([r, files[r]["verdict"], tool, str(v["rc"]), str(int(v["flagged"])), str(int(bool(v.get("error")))),
                                       v.get("note", "") or "", "%.4f" % v["seconds"] if "seconds" in v else ""]) + "\n")
        print("per-file verdicts: %s" % a.peers_tsv)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--peer-driver":
        return peer_driver(sys.argv[2])
    sys.stdout.reconfigure(line_buffering=True)  # the tables and the progress on stderr in order
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", default=os.environ.get("CKPT", os.path.join(here, "..", "build", "ckpt")))
    ap.add_argument("--root", default=os.path.join(here, ".."))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--markdown", action="store_true", help="print the tables as markdown")
    ap.add_argument("--misses", action="store_true")
    ap.add_argument("--peers", action="store_true",
                    help="also run picklescan, fickling, modelscan and modelaudit on every file (the truth environment)")
    ap.add_argument("--python", help="the Python of the scanners (default: scripts/truth-env.sh --print)")
    ap.add_argument("--tools", help="comma-separated subset of: " + ", ".join(PEER_TOOLS))
    ap.add_argument("--timeout", type=int, default=60, help="per-file timeout of a scanner, seconds (default 60)")
    ap.add_argument("--cli-check", type=int, default=0, metavar="N",
                    help="run each scanner's real command on N files too and compare its exit status")
    ap.add_argument("--peers-tsv", metavar="PATH", help="write every tool's verdict on every file")
    a = ap.parse_args()
    ckpt = os.path.abspath(a.ckpt)
    if not os.access(ckpt, os.X_OK):
        sys.exit("bench/security.py: no ckpt binary at %s (build it, or pass --ckpt / set CKPT)" % ckpt)
    py = truth_python(a.python, os.path.abspath(a.root)) if a.peers else None
    sec = os.path.join(os.path.abspath(a.root), "testdata", "security")
    with open(os.path.join(sec, "expected.json")) as f:
        files = json.load(f)["files"]

    rows = []
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-security-") as tmp:
        env = dict(os.environ, CKPT_SENTINEL=os.path.join(tmp, "sentinel"), NO_COLOR="1")
        for rel, e in files.items():
            best, rc, doc = None, None, None
            for _ in range(max(1, a.runs)):
                t0 = time.perf_counter()
                p = subprocess.run([ckpt, "check", "--json", os.path.join(sec, rel)], cwd=tmp, env=env,
                                   capture_output=True, timeout=60)
                dt = time.perf_counter() - t0
                best = dt if best is None else min(best, dt)
                rc = p.returncode
                try:
                    doc = json.loads(p.stdout)
                except ValueError:
                    doc = None
            where = [w for f in (doc or {}).get("findings", []) if f.get("id") == "dangerous-global"
                     for w in f.get("where", [])]
            named = all(any(alt in w for w in where for alt in alts) for alts in e.get("must_name", []))
            rows.append((rel, e, rc, best, named))
        if os.path.exists(os.path.join(tmp, "sentinel")):
            sys.exit("bench/security.py: THE SENTINEL WAS CREATED")

    by = collections.defaultdict(list)
    for r in rows:
        by[r[1]["verdict"]].append(r)
    # To be flagged (exit 1): a call or build (malicious), a denylisted object handed over uncalled
    # (dangerous-reference), a tensor written into by the pickle (tampered).
    mal = by["malicious"] + by["dangerous-reference"] + by["tampered"]
    caught = [r for r in mal if r[2] == 1]
    caught_named = [r for r in caught if r[4]]
    attacks = [r for r in mal if r[1]["made_as"] != "benign"]
    benign = by["clean"] + by["referenced-only"]
    fp = [r for r in benign if r[2] == 1]
    unread = [r for r in benign if r[2] == 3]
    extras = by["extras-only"]
    dormant = by["dormant"]
    refused = by["refused"]
    times = [r[3] for r in rows]

    def table(head, body):
        if a.markdown:
            print("| " + " | ".join(head) + " |")
            print("|" + "---|" * len(head))
            for b in body:
                print("| " + " | ".join(b) + " |")
        else:
            w = [max(len(x) for x in col) for col in zip(head, *body)]
            for line in [head] + body:
                print("  ".join(x.ljust(n) for x, n in zip(line, w)))
        print()

    a.ckpt_abs = ckpt
    a.ckpt_version = subprocess.run([ckpt, "--version"], capture_output=True, text=True).stdout.strip()
    print("ckpt: %s (%s)" % (ckpt, a.ckpt_version))
    print("corpus: %d files (%s)\n" % (len(rows), ", ".join("%s %d" % (k, len(v)) for k, v in sorted(by.items()))))
    table(["measure", "value"], [
        ["detection (malicious + dangerous-reference + tampered, exit 1)", pct(len(caught), len(mal))],
        ["  of which every expected global named", pct(len(caught_named), len(mal))],
        ["  attack files only (not benign saves of user classes)", pct(sum(r[2] == 1 for r in attacks), len(attacks))],
        ["false positives (clean + referenced-only, exit 1)", pct(len(fp), len(benign))],
        ["  benign not read (exit 3)", pct(len(unread), len(benign))],
        ["extras-only flagged (either answer allowed)", pct(sum(r[2] == 1 for r in extras), len(extras))],
        ["dormant flagged (either answer allowed)", pct(sum(r[2] == 1 for r in dormant), len(dormant))],
        ["refused by torch: exit 0 / 1 / 3 / other", "%d / %d / %d / %d" % tuple(
            [sum(r[2] == c for r in refused) for c in (0, 1, 3)] + [sum(r[2] not in (0, 1, 3) for r in refused)])],
        ["time: sum of best-of-%d per file" % a.runs, "%.2f s" % sum(times)],
        ["time: median / slowest file", "%.1f ms / %.1f ms" % (1000 * statistics.median(times), 1000 * max(times))],
    ])
    groups = collections.OrderedDict()
    for r in sorted(mal, key=lambda r: group_of(r[0], r[1])):
        groups.setdefault(group_of(r[0], r[1]), []).append(r)
    table(["family / source", "malicious caught", "named"],
          [[g, pct(sum(r[2] == 1 for r in rs), len(rs)), "%d" % sum(r[2] == 1 and r[4] for r in rs)]
           for g, rs in groups.items()])
    bgroups = collections.OrderedDict()
    for r in sorted(benign + extras, key=lambda r: r[1]["source"]):
        bgroups.setdefault(r[1]["source"] + (" (extras-only)" if r[1]["verdict"] == "extras-only" else ""), []).append(r)
    table(["benign source", "flagged (exit 1)", "not read (exit 3)"],
          [[g, pct(sum(r[2] == 1 for r in rs), len(rs)), "%d" % sum(r[2] == 3 for r in rs)]
           for g, rs in bgroups.items()])
    if a.misses:
        for r in mal:
            if r[2] != 1:
                print("missed (exit %s): %s  [%s]" % (r[2], r[0], ", ".join(c["global"] for c in r[1]["called"])))
        for r in fp:
            print("false positive: %s" % r[0])
    if a.peers:
        print()
        run_peers(a, sec, files, rows, table, py)


if __name__ == "__main__":
    main()
