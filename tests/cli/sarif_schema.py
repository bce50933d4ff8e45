#!/usr/bin/python3
"""`ckpt check --format sarif` against the official SARIF 2.1.0 schema (OASIS, committed in
tests/schemas/external/), on real check runs: benign, malicious, several findings, a partly read file and
files not scanned at all. Besides the schema, each log is held to facts that do not come from ckpt:
the findings testdata/check/expected.json names, the globals testdata/security/expected.json says a
loader calls, and the pickle opcode Python's own pickletools decodes at every byte offset ckpt reports.
The validator is proven able to fail on every run: broken copies of a real log must be rejected.

Needs python3-jsonschema (Debian; scripts/deps.sh installs it): run with /usr/bin/python3."""

import argparse
import copy
import io
import json
import os
import pickletools
import subprocess
import sys
import tempfile
import zipfile
import _compat_pickle

import jsonschema

ap = argparse.ArgumentParser()
ap.add_argument("--ckpt", required=True)
ap.add_argument("--root", required=True)
args = ap.parse_args()
root = args.root
schema = json.load(open(os.path.join(root, "tests/schemas/external/sarif-schema-2.1.0.json")))
validator = jsonschema.Draft4Validator(schema)
check_expected = json.load(open(os.path.join(root, "testdata/check/expected.json")))
security_expected = json.load(open(os.path.join(root, "testdata/security/expected.json")))["files"]
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run(path, *extra):
    p = subprocess.run([args.ckpt, "check", path, *extra], capture_output=True, text=True, cwd=root)
    return p.returncode, p.stdout, p.stderr


def schema_errors(doc):
    return sorted(validator.iter_errors(doc), key=lambda e: list(e.path))


def op_at(data, offset):
    """The opcode pickletools decodes at `offset` (name, argument)."""
    op, arg, _ = next(pickletools.genops(io.BytesIO(data[offset:])))
    return op.name, arg


def py3_name(arg):
    """GLOBAL's 'module name' as Python 3's unpickler imports it (protocol < 3: _compat_pickle's map)."""
    module, name = arg.split(" ", 1)
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[(module, name)]
    elif module in _compat_pickle.IMPORT_MAPPING:
        module = _compat_pickle.IMPORT_MAPPING[module]
    return f"{module}.{name}"


def member_bytes(path, member):
    full = os.path.join(root, path)
    if member is None:
        return open(full, "rb").read()
    if ":" in member:  # a nested blob's label: not a member of this file
        return None
    try:
        with zipfile.ZipFile(full) as z:
            return z.read(member)
    except (KeyError, zipfile.BadZipFile):
        return None


def check_log(path, extra=(), want_exit=None, want_status=None):
    rc, out, err = run(path, "--format", "sarif", *extra)
    try:
        log = json.loads(out)
    except json.JSONDecodeError as e:
        fail(f"{path}: stdout is not JSON ({e}): {out[:200]!r}")
        return None
    errs = schema_errors(log)
    for e in errs[:5]:
        fail(f"{path}: SARIF schema: {list(e.path)}: {e.message[:300]}")
    rc_json, out_json, _ = run(path, "--jsonl", *extra)  # JSON Lines: a directory operand is walked
    doc = json.loads(out_json.splitlines()[0])
    if rc != rc_json:
        fail(f"{path}: exit {rc} with --format sarif, {rc_json} with --json")
    if want_exit is not None and rc not in want_exit:
        fail(f"{path}: exit {rc}, want {want_exit}; stderr {err!r}")
    if want_status is not None and doc["status"] != want_status:
        fail(f"{path}: ckpt.check/1 status {doc['status']!r}, want {want_status!r}")
    if log.get("version") != "2.1.0" or len(log.get("runs", [])) != 1:
        fail(f"{path}: want version 2.1.0 and one run")
        return log
    run_ = log["runs"][0]
    driver = run_["tool"]["driver"]
    if driver["name"] != "ckpt" or not driver.get("version"):
        fail(f"{path}: driver name/version {driver.get('name')!r} {driver.get('version')!r}")
    rule_ids = [r["id"] for r in driver["rules"]]
    for res in run_["results"]:
        if res["ruleId"] not in rule_ids or rule_ids[res["ruleIndex"]] != res["ruleId"]:
            fail(f"{path}: result {res['ruleId']} not in the rules at its ruleIndex")
        for loc in res["locations"]:
            uri = loc["physicalLocation"]["artifactLocation"]["uri"]
            props = loc.get("properties", {})
            if uri != path and "file" not in props:
                fail(f"{path}: artifact uri {uri!r}, want the path as given")
    # The same findings, in the same order, as ckpt.check/1; a file not (fully) read is one more result
    # first, rule `unreadable` (code-scanning views show results, not notifications).
    want_ids = (["unreadable"] if doc["read_error"] else []) + [f["id"] for f in doc["findings"]]
    if [r["ruleId"] for r in run_["results"]] != want_ids:
        fail(f"{path}: SARIF results differ from the JSON findings")
    inv = run_["invocations"][0]
    if inv["executionSuccessful"] != (doc["status"] != "unscanned"):
        fail(f"{path}: executionSuccessful {inv['executionSuccessful']} with status {doc['status']}")
    if doc["read_error"] and not any(doc["read_error"] in n["message"]["text"]
                                     for n in inv.get("toolExecutionNotifications", [])):
        fail(f"{path}: the read error is not a notification")
    # Every structured location against the bytes: pickletools must decode the same opcode there.
    for f in doc["findings"]:
        if len(f["locations"]) != len(f["where"]):
            fail(f"{path}: {f['id']}: {len(f['locations'])} locations for {len(f['where'])} where")
        for loc in f["locations"]:
            if loc["offset"] is None or loc["opcode"] is None or loc["file"] is not None:
                continue
            data = member_bytes(path, loc["member"])
            if data is None:
                continue
            try:
                name, arg = op_at(data, loc["offset"])
            except Exception as e:  # noqa: BLE001 - any decode error is a wrong offset
                fail(f"{path}: {loc['where']}: pickletools cannot decode at {loc['offset']}: {e}")
                continue
            if name != loc["opcode"]:
                fail(f"{path}: {loc['where']}: pickletools reads {name} at {loc['offset']}, ckpt says {loc['opcode']}")
            if name in ("GLOBAL", "INST") and loc["global"] != py3_name(arg):
                fail(f"{path}: {loc['where']}: pickletools reads global {arg!r}, ckpt says {loc['global']!r}")
            verified.append(loc["where"])
    return log, doc


verified = []

# Benign and compile/load findings, against testdata/check/expected.json.
for name in ["clean.pt", "lightning_compiled.ckpt", "fsdp_sharded.pt", "data_dependent_if.pt", "lazy.pt"]:
    path = f"testdata/check/{name}"
    got = check_log(path, want_exit={0, 1})
    if got:
        ids = sorted({r["ruleId"] for r in got[0]["runs"][0]["results"]})
        want = sorted({f["id"] for f in check_expected[name]["findings"]})
        if not set(want) <= set(ids):
            fail(f"{path}: results {ids}, expected.json names {want}")
        if name == "clean.pt" and got[0]["runs"][0]["results"]:
            fail(f"{path}: a clean file has results")
        if name == "lightning_compiled.ckpt" and len(got[0]["runs"][0]["results"]) < 3:
            fail(f"{path}: want several results")

# A torch.compile finding in a helper of torch/functional.py: the line's function is a logical location, and
# the result's properties carry the dynamo facts (testdata/compile/t26/truth.json: breaks on 2.6).
got = check_log("testdata/compile/t26/unique_helper.pt", want_exit={0})
if got:
    results = [r for r in got[0]["runs"][0]["results"] if r["ruleId"] == "dynamic-shape-op"]
    if not results or "2.6" not in results[0]["properties"].get("compile", {}).get("breaks_on", []):
        fail("testdata/compile/t26/unique_helper.pt: no dynamic-shape-op result with properties.compile.breaks_on 2.6")
    else:
        kinds = {(l["kind"], l["fullyQualifiedName"]) for loc in results[0]["locations"] for l in loc.get("logicalLocations", [])}
        if ("function", "__torch__.torch.functional._unique_impl") not in kinds:
            fail(f"testdata/compile/t26/unique_helper.pt: logical locations {sorted(kinds)} name no function")

# Malicious: the globals a loader calls (testdata/check, testdata/security expected.json) are named in
# the results' structured global fields.
for name in ["evil_os_system.pkl", "evil_exec.pt", "evil_subprocess.pt", "stack_global_dotted.pkl", "inst_hidden.pkl",
             "nested_torch_load_evil.pkl"]:
    path = f"testdata/check/{name}"
    got = check_log(path, want_exit={1}, want_status="fail")
    if got and not any(r["level"] == "error" for r in got[0]["runs"][0]["results"]):
        fail(f"{path}: no error-level result")
# A zip name mismatch that torch reads past: a warning-level result, and the file passes.
got = check_log("testdata/check/zip_name_mismatch.pt", want_exit={0}, want_status="pass")
if got and [r["level"] for r in got[0]["runs"][0]["results"] if r["ruleId"] == "zip-name-mismatch"] != ["warning"]:
    fail("testdata/check/zip_name_mismatch.pt: want one warning-level zip-name-mismatch result")
n_security = 0
for name, e in sorted(security_expected.items()):
    if name.startswith("benign/") or e.get("verdict") != "malicious" or not e.get("called") or n_security >= 12:
        continue
    path = f"testdata/security/{name}"
    if not os.path.exists(os.path.join(root, path)):
        continue
    n_security += 1
    got = check_log(path, want_exit=set(e["exit"]))
    if not got:
        continue
    globals_ = {loc["global"] for f in got[1]["findings"] for loc in f["locations"] if loc["global"]}
    for c in e["called"]:
        if not c.get("indirect") and c["global"] not in globals_:
            fail(f"{path}: called global {c['global']} missing from the structured locations {sorted(globals_)}")
if n_security < 5:
    fail(f"only {n_security} security files checked")

# Read in part: no format starts with a zero byte, and the pickle scan stops at it.
with tempfile.TemporaryDirectory() as tmp:
    junk = os.path.join(tmp, "junk.pt")
    open(junk, "wb").write(b"\x00" * 3)
    check_log(junk, want_exit={3}, want_status="incomplete")
    rc, out, err = run(junk)
    if "pass" in out or "INCOMPLETE" not in out or "ckpt: error:" not in err:
        fail(f"{junk}: text output {out!r} / {err!r}")

# Not scanned at all: a missing file, a directory with no checkpoint in it.
if True:
    for path in ["testdata/check/does-not-exist.pt", "tests/cli/data/no_checkpoints"]:
        got = check_log(path, want_exit={3}, want_status="unscanned")
        if got and [r["ruleId"] for r in got[0]["runs"][0]["results"]] != ["unreadable"]:
            fail(f"{path}: an unscanned file has results other than its one `unreadable`")
        rc, out, err = run(path)
        if "pass" in out or "NOT SCANNED" not in out or "ckpt: error:" not in err:
            fail(f"{path}: text output {out!r} / {err!r}")
        rc, _, _ = run(path, "--fail-on", "never")
        if rc != 0:
            fail(f"{path}: --fail-on never exits {rc}")

# Several files: ONE log whose single run holds every file's results, an artifact per file with its status
# (the same as each file's ckpt.check/1 line), and a notification for the file not scanned.
many = ["testdata/check/clean.pt", "testdata/check/evil_os_system.pkl", "testdata/check/does-not-exist.pt",
        "testdata/check/ddp_prefix.pt"]
rc, out, err = run(many[0], *many[1:], "--format", "sarif")
rc_json, out_json, _ = run(many[0], *many[1:], "--jsonl")
lines = [json.loads(line) for line in out_json.splitlines()]
try:
    log = json.loads(out)
except json.JSONDecodeError as e:
    log = None
    fail(f"several files: stdout is not one JSON document ({e})")
if log is not None:
    for e in schema_errors(log)[:5]:
        fail(f"several files: SARIF schema: {list(e.path)}: {e.message[:300]}")
    if rc != 3 or rc_json != 3:
        fail(f"several files: exit {rc} (sarif) / {rc_json} (json), want 3 (a file not scanned is worse than a finding)")
    if len(log["runs"]) != 1:
        fail(f"several files: {len(log['runs'])} runs, want one")
    run_ = log["runs"][0]
    arts = run_.get("artifacts", [])
    if [a["location"]["uri"] for a in arts] != many:
        fail(f"several files: artifacts {[a['location']['uri'] for a in arts]}, want {many} in input order")
    if [d["file"] for d in lines] != many:
        fail(f"several files: JSON Lines name {[d['file'] for d in lines]}")
    for a, d in zip(arts, lines):
        if a["properties"]["status"] != d["status"]:
            fail(f"{d['file']}: artifact status {a['properties']['status']!r}, ckpt.check/1 says {d['status']!r}")
    want_results = [(x, d["file"]) for d in lines
                    for x in (["unreadable"] if d["read_error"] else []) + [f["id"] for f in d["findings"]]]
    got_results = [(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in run_["results"]]
    if got_results != want_results:
        fail(f"several files: results {got_results}, the JSON Lines say {want_results}")
    if ("dangerous-global", "testdata/check/evil_os_system.pkl") not in got_results:
        fail("several files: the dangerous global of evil_os_system.pkl is not among the results")
    inv = run_["invocations"][0]
    notes = [n["message"]["text"] for n in inv.get("toolExecutionNotifications", [])]
    if inv["executionSuccessful"] or len(notes) != 1 or "does-not-exist.pt" not in notes[0]:
        fail(f"several files: executionSuccessful {inv['executionSuccessful']}, notifications {notes}")

if len(verified) < 5:
    fail(f"only {len(verified)} byte offsets verified with pickletools")

# The validator itself must reject broken logs (else a vacuous pass would hide everything above).
log = json.loads(run("testdata/check/evil_os_system.pkl", "--format", "sarif")[1])
broken = []
b = copy.deepcopy(log); b["runs"][0]["results"][0]["level"] = "fatal"; broken.append(("level fatal", b))
b = copy.deepcopy(log); del b["runs"][0]["tool"]["driver"]["name"]; broken.append(("no driver name", b))
b = copy.deepcopy(log); b["version"] = "2.0.0"; broken.append(("version 2.0.0", b))
b = copy.deepcopy(log); del b["runs"][0]["results"][0]["message"]; broken.append(("result without message", b))
for what, doc in broken:
    if not schema_errors(doc):
        fail(f"the validator accepts a broken log ({what})")

print(f"{len(verified)} offsets verified; {'FAILED' if failures else 'ok'}")
sys.exit(1 if failures else 0)
