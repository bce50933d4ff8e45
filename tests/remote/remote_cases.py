#!/usr/bin/python3
"""Remote inputs (`ckpt summary|check|diff URL`: https:// and http://, hf://ORG/REPO[@REV][/PATH],
s3://BUCKET/KEY and s3://BUCKET/PREFIX/) against real servers on 127.0.0.1 (tests/remote/servers.py):

- nginx (Debian's nginx-light): plain HTTP and HTTPS (a self-signed certificate made for the run) serving
  files with Range/ETag; an HTTPS Hugging Face Hub (`HF_ENDPOINT`: /ORG/REPO/resolve/REV/PATH redirecting
  LFS files to an HTTPS "CDN" that refuses any Authorization header, /api/models/ORG/REPO/tree/REV[/PATH]
  in the Hub's JSON with Link pagination on one repo, a gated repo that wants `Authorization: Bearer
  $HF_TOKEN`);
- moto's S3 server (PyPI, pinned in tests/remote/requirements-s3.txt, in build-venv/s3/) behind
  servers.S3Gateway, which checks AWS Signature V4 as S3 does (moto itself accepts any V4 signature)
  (`AWS_ENDPOINT_URL`);
- a misbehaving Python HTTP server: 404, 401, 403, a 500 then success, a 429 with Retry-After then
  success, Range ignored, an ETag that changes, a stalled body, a connection reset, a body cut short.

What is checked:
- the same files over http://, https:// (SSL_CERT_FILE, and CURL_CA_BUNDLE), hf:// and s3:// give the
  JSON of the local file (`summary --json`, `check --json`), with the top-level "remote" object and the
  input's name taken out (helper `normalise`: the input as given, URL or local path, becomes <INPUT>
  wherever a string holds it); `check --format sarif` names the URL as its artifact; `diff URL LOCAL`
  says they are the same (exit 0);
- a whole sharded HF repo (hf://ORG/REPO, config.json + index + shards) is its local folder; @REV (a tag,
  and the commit it stands for) picks other files; a paginated tree listing is followed; a folder inside
  a repo (hf://ORG/REPO/PATH); the gated repo: without HF_TOKEN (and with a wrong one) exit 4 with one
  stderr line naming the URL and HF_TOKEN, with it the file's summary; the token is never printed and
  never reaches the CDN;
- a malicious optimizer.pt beside an hf:// folder's model.safetensors: `check` exits 1 naming it, `summary`
  lists it in side_files; files whose name says no pickle, and sub-folders, are never fetched;
- s3://BUCKET/PREFIX/ (files, and a sharded HF folder) is the local directory; a wrong secret, no
  credentials: exit 4 with one line naming the s3:// URL, the secret never printed; credentials from a
  ~/.aws/credentials profile (AWS_PROFILE), from AWS_SHARED_CREDENTIALS_FILE, session credentials
  (AWS_SESSION_TOKEN);
- the "remote" object {"url", "requests", "bytes"}: a safetensors file whose header is < 100 kB is 1
  request over http(s):// and s3:// (100,000 bytes, as huggingface_hub asks), one with a 187 KiB header 2
  (the second exactly the header's rest); a torch.save zip at most 3 requests and 1 MiB, also a 200 MB one
  (written here by Debian's torch), whose nginx log shows only range requests; its `check` fetches <= 1
  MiB too; torch.save zips of 1k, 10k and 100k small tensors (data.pkl 0.1 to 10 MB) at most 3 ranged
  requests over http:// and hf://, no byte asked twice, at most 512 KiB more than data.pkl, the central
  directory and the end records; the request count is the servers' count;
- failures: 404 exit 3; 401 / 403 exit 4; a 500 or a 429 once, a reset connection, a body cut short once:
  success after a retry the server saw; a server that ignores Range: exit 3 or 4 saying so and naming
  --limit, success with --limit download-bytes=100M; an ETag that changes: an error saying the file
  changed; a stalled body with --limit stall-seconds=2: an error in < 30 s; a body always cut short: a
  clean error (or success); a self-signed certificate without SSL_CERT_FILE: exit 4 naming the
  certificate. Every failure is exactly one stderr line `ckpt: error: ...` with the URL, no secret, no
  traceback, abort or sanitizer report.

Usage: remote_cases.py --ckpt build/ckpt --root . [--only REGEX] [--keep]
Exit 0: all passed; 1: failures (listed); 77: skipped, only when nginx or moto_server are missing AND
CKPT_REMOTE_OPTIONAL=1 (otherwise a missing server is a failure). Servers need: nginx-light, openssl, curl,
moto_server (scripts/deps.sh makes build-venv/s3/), python3-torch for the large file.
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
import traceback
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import servers  # noqa: E402

MiB = 1 << 20
CRASH = re.compile(r"Traceback|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|terminate called|"
                   r"Aborted|Segmentation fault|core dumped|std::|what\(\)", re.I)

FILES = {  # name served -> testdata path: small real files of several formats
    "sd_compiled_211.pt": "t211/sd_compiled_211.pt",  # torch.save zip (torch 2.11)
    "lightning_fit.ckpt": "t211/lightning_fit.ckpt",  # Lightning checkpoint (zip)
    "model.safetensors": "t211/hf_bert_bf16/model.safetensors",  # safetensors, bfloat16
    "export_211.pt2": "t211/export_211.pt2",  # torch.export archive
    "legacy_state_dict.pt": "t113/legacy_state_dict.pt",  # legacy (non-zip) torch.save
}
GEN = r"""
import collections, sys, torch
def sd(n):
    d = collections.OrderedDict()
    for i in range(n):
        d[f"layers.{i}.weight"] = torch.zeros(1024, 1024)
        d[f"layers.{i}.bias"] = torch.zeros(1024)
    return d
torch.save(sd(50), sys.argv[1])   # 200 MiB of zeros, a state dict as model.state_dict() gives
torch.save(sd(6), sys.argv[2])    # 24 MiB: larger than any one read, so a reader needs several ranges
for n, path in zip((1000, 10000, 100000), sys.argv[3:6]):  # many small tensors: a data.pkl of 0.1, 1 and 10 MB
    torch.save(collections.OrderedDict((f"model.layers.{i}.weight", torch.zeros(2)) for i in range(n)), path)
# a safetensors file whose header (150 KB) is longer than the first request (gen_formats.py writes the format as
# the reference library does, proven byte-identical there)
sys.path.insert(0, sys.argv[7])
import gen_formats
with open(sys.argv[6], "wb") as f:
    f.write(gen_formats.st_serialize({f"model.layers.{i}.mlp.down_proj.weight": torch.zeros(2) for i in range(2000)}))
"""
MANY = (1000, 10000, 100000)


# ---------------------------------------------------------------------------------------------------
# helpers

def parent(path):
    """The folder of a file input (URL or local path): what a sibling (config.json) is named under."""
    return path.rstrip("/").rsplit("/", 1)[0] if "/" in path.rstrip("/") else ""


def normalise(doc, prefixes, dirs=()):
    """`doc` without the top-level "remote" object, with every prefix in `prefixes` (the input as given and
    its other spellings: URL, URL@REV, local path) replaced by <INPUT> in every string, keys included,
    then the input's folder (`dirs`: a sibling's name, e.g. the config.json beside a file) by <DIR>."""
    pre = [(p, "<INPUT>") for p in sorted({p.rstrip("/") for p in prefixes if p}, key=len, reverse=True)]
    pre += [(p, "<DIR>") for p in sorted({p.rstrip("/") for p in dirs if p and "/" in p}, key=len, reverse=True)]

    def s(x):
        for p, token in pre:
            if p in x:
                return x.replace(p, token)
        return x

    def walk(x):
        if isinstance(x, dict):
            return {s(k): walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, str):
            return s(x)
        return x

    if isinstance(doc, dict):
        doc = {k: v for k, v in doc.items() if k != "remote"}
    return walk(doc)


def differences(a, b, path="", out=None, limit=6):
    """Where two JSON values differ: ["/path: a != b", ...] (at most `limit`)."""
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: {'missing' if k not in a else json.dumps(a[k])[:80]} != {'missing' if k not in b else json.dumps(b[k])[:80]}")
            else:
                differences(a[k], b[k], f"{path}/{k}", out, limit)
            if len(out) >= limit:
                break
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            differences(x, y, f"{path}/{i}", out, limit)
    elif a != b:
        out.append(f"{path or '/'}: {json.dumps(a)[:100]} != {json.dumps(b)[:100]}")
    return out


def json_docs(text):
    """Every JSON document in stdout (one, an array, or JSON Lines)."""
    docs, dec, pos = [], json.JSONDecoder(), 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return docs
        doc, pos = dec.raw_decode(text, pos)
        if isinstance(doc, list):
            docs.extend(doc)
        else:
            docs.append(doc)


# run_measured's wrapper: argv = [-c, RESULT_FILE, CKPT, ARGS...]; ckpt dies with it (PR_SET_PDEATHSIG).
MEASURE = r"""
import ctypes, os, signal, sys
pid = os.fork()
if pid == 0:
    ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL, 0, 0, 0)
    os.execv(sys.argv[2], sys.argv[2:])
_, status, ru = os.wait4(pid, 0)
open(sys.argv[1], "w").write(f"{os.waitstatus_to_exitcode(status)} {ru.ru_maxrss}")
"""


class Result:
    def __init__(self, args, rc, out, err, secs, timed_out=False):
        self.args, self.rc, self.out, self.err, self.secs, self.timed_out = args, rc, out, err, secs, timed_out

    def __str__(self):
        return f"`ckpt {' '.join(self.args)}`: exit {self.rc} in {self.secs:.1f} s; stderr {self.err.strip()[:400]!r}"


class Case:
    def __init__(self, T, name):
        self.T, self.name, self.problems = T, name, []

    def expect(self, cond, what):
        if not cond:
            self.problems.append(what)
        return bool(cond)

    def __enter__(self):
        return self

    def __exit__(self, typ, exc, tb):
        if typ is not None and not issubclass(typ, (KeyboardInterrupt, SystemExit)):
            self.problems.append(f"the test itself raised {typ.__name__}: {exc}\n" + "".join(traceback.format_tb(tb))[-1200:])
        self.T.done(self)
        return typ is not None and not issubclass(typ, (KeyboardInterrupt, SystemExit))


class Tester:
    def __init__(self, ckpt, root, tmp, only=None):
        self.ckpt, self.root, self.tmp, self.only = ckpt, root, tmp, re.compile(only) if only else None
        self.results = []
        self.secrets = set()  # strings no output may hold
        self.schemas = None
        try:
            sys.path.insert(0, os.path.join(root, "tests", "cli"))
            import json_schemas
            self.schemas = json_schemas.Schemas(root)
        except Exception as e:  # noqa: BLE001
            print(f"note: JSON Schema validation off ({e})")
        home = os.path.join(tmp, "home")
        os.makedirs(home, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if not (k.startswith(("AWS_", "HF_", "HUGGING_FACE", "SSL_CERT", "CURL_")) or k in ("HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "NETRC")
                       or k.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ftp_proxy"))}
        # nothing may leave 127.0.0.1: no proxy, no user credentials, no EC2 metadata service
        # (HOME is an empty directory: no ~/.aws, no ~/.cache/huggingface/token)
        env.update(HOME=home, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", AWS_EC2_METADATA_DISABLED="true",
                   HF_HUB_DISABLE_TELEMETRY="1")
        # Under AddressSanitizer (the sanitizer pass) freed memory is held in a 256 MiB quarantine: the
        # memory bounds of the hostile cases would measure it, not ckpt. A small one keeps the checks.
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS", ""), "quarantine_size_mb=8"]))
        self.base_env = env

    def wanted(self, name):
        return self.only is None or bool(self.only.search(name))

    def case(self, name):
        return Case(self, name)

    def done(self, case):
        self.results.append((case.name, case.problems))
        print(("ok   " if not case.problems else "FAIL ") + case.name, flush=True)

    def env(self, **kw):
        e = dict(self.base_env)
        for k, v in kw.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
        return e

    def run(self, args, env, timeout=60, prefix=None):
        t0 = time.monotonic()
        cmd = [*(prefix or []), self.ckpt, *args]
        try:
            p = subprocess.run(cmd, capture_output=True, env=env, cwd=self.tmp, timeout=timeout)
            out, err, rc, to = p.stdout, p.stderr, p.returncode, False
        except subprocess.TimeoutExpired as e:
            out, err, rc, to = e.stdout or b"", e.stderr or b"", None, True
        dec = lambda b: b.decode("utf-8", "replace")  # noqa: E731
        return Result(list(args), rc, dec(out), dec(err), time.monotonic() - t0, to)

    def run_measured(self, args, env, timeout=60):
        """run() that also measures ckpt's peak RSS (KiB, Result.rss). A small Python process forks ckpt and
        waits for it (os.wait4): forked from this test, whose memory holds the servers' files, ckpt's peak
        would start at this process's (Linux keeps the pre-exec peak)."""
        with tempfile.NamedTemporaryFile(mode="r") as f:
            r = self.run(args, env, timeout=timeout, prefix=[sys.executable, "-c", MEASURE, f.name])
            text = f.read().split()
        if len(text) == 2:
            r.rc, r.rss = int(text[0]), int(text[1])
        else:
            r.rss = 0
        return r

    def clean(self, c, r):
        """No crash, no secret, whatever the exit; returns whether all held."""
        n = len(c.problems)
        c.expect(not r.timed_out, f"{r}: timed out")
        c.expect(r.rc is None or r.rc >= 0, f"{r}: killed by signal {-(r.rc or 0)}")
        c.expect(not CRASH.search(r.err), f"{r}: a crash report on stderr")
        for s in self.secrets:
            c.expect(s not in r.out and s not in r.err, f"{r}: prints the secret {s[:4]}...")
        return len(c.problems) == n

    def ok(self, c, r):
        self.clean(c, r)
        ok = c.expect(r.rc == 0, f"{r}: expected exit 0")
        bad = [l for l in r.err.splitlines() if l.strip() and not l.startswith("ckpt: warning: ")]
        c.expect(not bad, f"{r}: unexpected stderr")
        return ok

    def error(self, c, r, url, codes, *patterns):
        """One failure: exit in codes, exactly one stderr line `ckpt: error: ...` naming url, matching patterns."""
        self.clean(c, r)
        c.expect(r.rc in codes, f"{r}: expected exit {' or '.join(map(str, codes))}")
        lines = r.err.splitlines()
        if c.expect(len(lines) == 1, f"{r}: expected exactly one stderr line, got {len(lines)}") and lines:
            line = lines[0]
            c.expect(line.startswith("ckpt: error: "), f"{r}: stderr does not start with 'ckpt: error: '")
            c.expect(url in line, f"{r}: stderr does not name {url}")
            for p in patterns:
                c.expect(re.search(p, line, re.I), f"{r}: stderr does not match /{p}/")

    def docs(self, c, r):
        if r.rc not in (0, 1):
            return []
        if self.schemas is not None and ("--json" in r.args or "--jsonl" in r.args):
            for problem in self.schemas.output_problems(r.out):
                c.expect(False, f"{r}: schema: {problem}")
        try:
            return json_docs(r.out)
        except ValueError as e:
            c.expect(False, f"{r}: stdout is not JSON: {e}")
            return []

    def same(self, c, what, remote_docs, remote_prefixes, local_docs, local_prefixes):
        """The documents agree but for the names of the inputs (and of their folders, for a file)."""
        a = [normalise(d, remote_prefixes, [parent(p) for p in remote_prefixes]) for d in remote_docs]
        b = [normalise(d, local_prefixes, [parent(p) for p in local_prefixes]) for d in local_docs]
        if not c.expect(len(a) == len(b), f"{what}: {len(a)} documents, the local input gives {len(b)}"):
            return False
        for i, (x, y) in enumerate(zip(a, b)):
            d = differences(x, y)
            if not c.expect(not d, f"{what}: document {i} differs from the local one: " + "; ".join(d)):
                return False
        return True

    def remote_obj(self, c, r, doc, url):
        rem = doc.get("remote") if isinstance(doc, dict) else None
        if not c.expect(isinstance(rem, dict), f"{r}: no top-level \"remote\" object"):
            return None
        c.expect(rem.get("url") == url, f"{r}: remote.url {rem.get('url')!r}, want {url!r}")
        for k in ("requests", "bytes"):
            c.expect(isinstance(rem.get(k), int) and not isinstance(rem.get(k), bool) and rem.get(k) >= 0, f"{r}: remote.{k} {rem.get(k)!r} is not a count")
        return rem


# ---------------------------------------------------------------------------------------------------
# the cases

def main():
    ap = argparse.ArgumentParser(description="remote inputs against real servers on 127.0.0.1")
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--root", required=True)
    ap.add_argument("--only", help="run only the cases whose name matches this regex")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGHUP, lambda *_: sys.exit(129))
    ckpt = os.path.abspath(a.ckpt)
    root = os.path.abspath(a.root)
    t_start = time.monotonic()

    missing = []
    if not os.access(servers.NGINX, os.X_OK):
        missing.append(f"nginx ({servers.NGINX}; Debian package nginx-light)")
    if not os.access(servers.MOTO_SERVER, os.X_OK):
        missing.append(f"moto_server ({servers.MOTO_SERVER}: run scripts/deps.sh)")
    for tool in ("openssl", "curl"):
        if not shutil.which(tool):
            missing.append(tool)
    if missing:
        if os.environ.get("CKPT_REMOTE_OPTIONAL") == "1":
            print("skipped: missing " + ", ".join(missing))
            return 77
        print("FAIL missing servers: " + ", ".join(missing) + " (set CKPT_REMOTE_OPTIONAL=1 to skip instead)")
        return 1

    tmp = tempfile.mkdtemp(prefix="ckpt-remote-")
    try:
        return run_all(ckpt, root, tmp, a.only, t_start)
    except Exception:  # noqa: BLE001  (a server that did not start, a broken harness)
        traceback.print_exc()
        print("FAIL setup: the test harness failed (above)")
        return 1
    finally:
        if a.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def mirror(tmp, rel, files):
    """A local copy of a remote layout: files {path: source} under tmp/rel; returns rel."""
    for p, src in files.items():
        dst = os.path.join(tmp, rel, p)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(src, dst)
    return rel


def run_all(ckpt, root, tmp, only, t_start):
    T = Tester(ckpt, root, tmp, only)
    td = os.path.join(root, "testdata")
    files = {n: os.path.join(td, p) for n, p in FILES.items()}
    folder = lambda name: {f: os.path.join(td, "hf211", name, f) for f in sorted(os.listdir(os.path.join(td, "hf211", name)))}  # noqa: E731
    gpt2, llama, bert = folder("gpt2_tiny"), folder("llama_gqa_bf16"), folder("bert_enc")
    bert_single = {f: os.path.join(td, "t211", "hf_bert_bf16", f) for f in ("config.json", "model.safetensors")}
    evil = os.path.join(tmp, "evil.pkl")  # protocol 2: GLOBAL posix.system, REDUCE
    with open(evil, "wb") as f:
        f.write(b"\x80\x02cposix\nsystem\nX\x0a\x00\x00\x00echo pwned\x85R.")
    sidecar = {**bert_single, "optimizer.pt": evil, "rng_state.pth": os.path.join(td, "trainer", "checkpoint-2", "rng_state.pth"),
               "blob": evil, "sub/extra.pt": evil}

    # the large files, written while the servers start
    gen_dir = os.path.join(tmp, "gen")
    os.makedirs(gen_dir)
    large, medium = os.path.join(gen_dir, "large.pt"), os.path.join(gen_dir, "medium.pt")
    many = {n: os.path.join(gen_dir, f"sd_{n // 1000}k.pt") for n in MANY}
    big_header = os.path.join(gen_dir, "big_header.safetensors")
    gen = subprocess.Popen(["/usr/bin/python3", "-c", GEN, large, medium, *many.values(), big_header, td], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)

    # local mirrors of every remote layout (inputs are given relative to tmp, the cwd of every run)
    www = mirror(tmp, "m/www", files)
    hub_repos = [  # (org, repo, rev, files, access, page_size)
        ("org", "files", "main", {"sd_compiled_211.pt": files["sd_compiled_211.pt"], "ckpt/lightning_fit.ckpt": files["lightning_fit.ckpt"],
                                  "model.safetensors": files["model.safetensors"], "export/export_211.pt2": files["export_211.pt2"],
                                  "legacy_state_dict.pt": files["legacy_state_dict.pt"]}, "public", None),
        ("org", "gpt2", "main", gpt2, "public", None),
        ("org", "gpt2", "v1", llama, "public", None),
        ("org", "paged", "main", bert, "public", 2),
        ("org", "nested", "main", {**{f"bert/{k}": v for k, v in bert.items()}, "other/sd.pt": files["sd_compiled_211.pt"],
                                   "README.md": os.path.join(td, "README.md")}, "public", 2),
        ("org", "gated", "main", bert_single, "gated", None),
        ("org", "sidecar", "main", sidecar, "public", None),
    ]
    for org, repo, rev, fl, _, _ in hub_repos:
        mirror(tmp, f"m/hub/{org}/{repo}/{rev}", fl)
    s3_objects = {**{f"models/{n}": p for n, p in files.items()}, **{f"hf/bert_enc/{k}": v for k, v in bert.items()}}
    mirror(tmp, "m/s3/ckpt", s3_objects)

    hf_token = "hf_" + os.urandom(12).hex() + "Tok"
    wrong_token = "hf_wrong" + os.urandom(8).hex()
    wrong_secret = "wrongSecret/" + os.urandom(6).hex() + "+Q"
    temp_secret = "tempSecret/" + os.urandom(6).hex() + "+Z"
    session_token = "FwoGZXIvYXdzE" + os.urandom(10).hex() + "SESSION"
    T.secrets |= {hf_token, wrong_token, wrong_secret, temp_secret, session_token}

    with servers.S3Server(tmp=os.path.join(tmp, "s3")) as s3, servers.MisbehavingServer({}, stall_seconds=90) as bad, \
            servers.MisbehavingServer({}) as other:
        s3.create_bucket("ckpt")
        for key, src in s3_objects.items():
            s3.put("ckpt", key, src)
        s3.add_credentials("TEMPKEY", temp_secret, session_token)
        try:
            out, _ = gen.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            gen.kill()
            out, _ = gen.communicate()
        have_large = gen.returncode == 0
        if not have_large:
            with T.case("setup: writing the large torch.save files with /usr/bin/python3 and torch") as c:
                c.expect(False, out.decode(errors="replace")[-1500:])
        for srv in (bad, other):
            srv.files.update({"medium.pt": medium, "model.safetensors": files["model.safetensors"], "sd_compiled_211.pt": files["sd_compiled_211.pt"]})
        bad.redirect_to = other.url
        ng = servers.NginxServers(tmp=os.path.join(tmp, "nginx"), hf_token=hf_token)
        for n, p in files.items():
            ng.add_file(n, p)
        if have_large:
            ng.add_file("large.pt", large)
            for p in [*many.values(), big_header]:
                ng.add_file(os.path.basename(p), p)
            hub_repos.append(("org", "many", "main", {os.path.basename(p): p for p in [*many.values(), big_header]}, "public", None))
        for org, repo, rev, fl, access, page in hub_repos:
            ng.add_hf_repo(org, repo, rev, fl, access=access, page_size=page)
        with ng:
            cert = ng.cert
            envs = {
                "http": T.env(HF_ENDPOINT=ng.hub_url, AWS_ENDPOINT_URL=s3.endpoint),
                "https": T.env(SSL_CERT_FILE=cert, HF_ENDPOINT=ng.hub_url, AWS_ENDPOINT_URL=s3.endpoint),
                "https-curl-ca": T.env(CURL_CA_BUNDLE=cert, HF_ENDPOINT=ng.hub_url, AWS_ENDPOINT_URL=s3.endpoint),
                "hf": T.env(SSL_CERT_FILE=cert, HF_ENDPOINT=ng.hub_url, AWS_ENDPOINT_URL=s3.endpoint),
                "s3": T.env(AWS_ENDPOINT_URL=s3.endpoint, AWS_ACCESS_KEY_ID="CKPTTEST", AWS_SECRET_ACCESS_KEY="CKPTTEST",
                            AWS_REGION="us-east-1", HF_ENDPOINT=ng.hub_url),
            }
            ctx = dict(T=T, ng=ng, s3=s3, bad=bad, other=other, envs=envs, tmp=tmp, www=www, files=files, hf_token=hf_token, wrong_token=wrong_token,
                       wrong_secret=wrong_secret, temp_secret=temp_secret, session_token=session_token, have_large=have_large,
                       large=large, medium=medium, many=many, big_header=big_header, gpt2=gpt2, bert=bert)
            cases_same_files(**ctx)
            cases_hf(**ctx)
            cases_side_files(**ctx)
            cases_s3(**ctx)
            cases_large(**ctx)
            cases_many(**ctx)
            cases_hostile(**ctx)
            cases_secrets(**ctx)
            cases_tls(**ctx)
            with T.case("cdn: no request ever carried an Authorization header (credentials dropped at the redirect)") as c:
                leaked = [e for e in ng.requests("cdn") if e["auth"] != "0"]
                c.expect(not leaked, f"{len(leaked)} CDN requests with Authorization: {[e['uri'][:60] for e in leaked[:3]]}")

    fails = [(n, p) for n, p in T.results if p]
    for name, problems in fails:
        print(f"\nFAIL {name}")
        for p in problems[:8]:
            print("     " + p.replace("\n", "\n     "))
        if len(problems) > 8:
            print(f"     ... and {len(problems) - 8} more")
    print(f"\n{len(T.results)} cases, {len(T.results) - len(fails)} passed, {len(fails)} failed ({time.monotonic() - t_start:.0f} s)")
    return 1 if fails else 0


def hub_log(ng):
    """The Hub's and the CDN's requests, in the order nginx logged them."""
    return [e for e in ng.requests() if e["server"] in ("hub", "cdn")]


def log_slice(getter):
    """Entries a server logs from now on: call the returned function after the run."""
    n = len(getter())
    return lambda: getter()[n:]


def cases_same_files(T, ng, s3, envs, www, files, **_):
    """Each file over each transport: summary / check / sarif / diff equal to the local file's."""
    local_cache = {}

    def local_run(args, path):
        key = (tuple(args), path)
        if key not in local_cache:
            local_cache[key] = T.run([*args, path], T.base_env)
        return local_cache[key]

    transports = [
        ("http", lambda n: f"{ng.http_url}/{n}", lambda: ng.requests("http")),
        ("https", lambda n: f"{ng.https_url}/{n}", lambda: ng.requests("https")),
        ("https-curl-ca", lambda n: f"{ng.https_url}/{n}", lambda: ng.requests("https")),
        ("hf", lambda n: "hf://org/files/" + {"lightning_fit.ckpt": "ckpt/lightning_fit.ckpt", "export_211.pt2": "export/export_211.pt2"}.get(n, n),
         lambda: hub_log(ng)),
        ("s3", lambda n: f"s3://ckpt/models/{n}", lambda: s3.requests),
    ]
    for tname, url_of, log in transports:
        for name in files:
            cname = f"{tname}: {name}: summary, check, diff equal to the local file"
            if not T.wanted(cname):
                continue
            url = url_of(name)
            loc = f"{www}/{name}" if tname != "hf" else f"m/hub/org/files/main/{url[len('hf://org/files/'):]}"
            env = envs[tname]
            with T.case(cname) as c:
                seen = log_slice(log)
                r = T.run(["summary", "--json", url], env)
                if T.ok(c, r):
                    got = T.docs(c, r)
                    lr = local_run(["summary", "--json"], loc)
                    c.expect(lr.rc == 0, f"local {lr}")
                    c.expect(all("remote" not in d for d in T.docs(c, lr)), f"local {lr}: a \"remote\" object for a local file")
                    T.same(c, f"summary --json {url}", got, [url], T.docs(c, lr), [loc])
                    entries = seen()
                    rem = T.remote_obj(c, r, got[0], url) if got else None
                    if rem:
                        size = os.path.getsize(files[name])
                        c.expect(rem["requests"] == len(entries), f"{r}: remote.requests {rem['requests']}, the server saw {len(entries)}")
                        if tname in ("http", "https", "https-curl-ca"):
                            sent = sum(e["bytes"] for e in entries)
                            c.expect(rem["bytes"] == sent, f"{r}: remote.bytes {rem['bytes']}, nginx sent {sent}")
                        if name.endswith(".safetensors") and tname != "hf":
                            c.expect(rem["requests"] == 1, f"{r}: a safetensors file with a small header: {rem['requests']} requests, want 1")
                        if name.endswith((".pt", ".ckpt", ".pt2")) and tname != "hf":
                            c.expect(rem["requests"] <= 3, f"{r}: a torch zip: {rem['requests']} requests, want <= 3")
                        if tname == "hf":
                            c.expect(rem["requests"] <= 6, f"{r}: {rem['requests']} requests over the Hub, want <= 6")
                        c.expect(rem["bytes"] <= max(MiB, size), f"{r}: {rem['bytes']} bytes fetched for a {size}-byte file")
                r = T.run(["check", "--json", url], env)
                T.clean(c, r)
                lr = local_run(["check", "--json"], loc)
                if c.expect(r.rc == lr.rc, f"{r}: exit differs from the local file's ({lr.rc})") and r.rc in (0, 1):
                    T.same(c, f"check --json {url}", T.docs(c, r), [url], T.docs(c, lr), [loc])
                if tname in ("http", "hf", "s3"):
                    r = T.run(["check", "--format", "sarif", url], env)
                    T.clean(c, r)
                    lr = local_run(["check", "--format", "sarif"], loc)
                    if c.expect(r.rc == lr.rc, f"{r}: exit differs from the local file's ({lr.rc})") and r.rc in (0, 1):
                        sar = T.docs(c, r)
                        uris = re.findall(r'"uri":\s*"([^"]*)"', r.out)
                        c.expect(all(u == url for u in uris), f"{r}: SARIF artifact locations {sorted(set(uris))[:3]}, want {url}")
                        T.same(c, f"check --format sarif {url}", sar, [url], T.docs(c, lr), [loc])
                r = T.run(["diff", url, loc], env)
                if T.ok(c, r):
                    c.expect("same:" in r.out, f"{r}: diff does not say 'same:': {r.out[:300]!r}")


def cases_hf(T, ng, envs, hf_token, wrong_token, gpt2, bert, **_):
    env = envs["hf"]

    def folder_case(cname, url, loc, prefixes, check=None):
        if not T.wanted(cname):
            return
        with T.case(cname) as c:
            seen = log_slice(lambda: hub_log(ng))
            r = T.run(["summary", "--json", url], env)
            if T.ok(c, r):
                got = T.docs(c, r)
                lr = T.run(["summary", "--json", loc], T.base_env)
                T.same(c, f"summary --json {url}", got, prefixes, T.docs(c, lr), [loc])
                c.expect(got and "hf" in got[0].get("metadata", {}), f"{r}: no metadata.hf (config.json not read)")
                rem = T.remote_obj(c, r, got[0], url) if got else None
                entries = seen()
                if rem:
                    c.expect(rem["requests"] == len(entries), f"{r}: remote.requests {rem['requests']}, the Hub and CDN saw {len(entries)}")
                if check:
                    check(c, entries)
            r = T.run(["diff", url, loc], env)
            if T.ok(c, r):
                c.expect("same:" in r.out, f"{r}: diff does not say 'same:'")

    folder_case("hf: a whole sharded repo (hf://org/gpt2) is its local folder", "hf://org/gpt2", "m/hub/org/gpt2/main",
                ["hf://org/gpt2", "hf://org/gpt2@main"])
    folder_case("hf: @v1 (a tag) reads that revision's files", "hf://org/gpt2@v1", "m/hub/org/gpt2/v1", ["hf://org/gpt2@v1", "hf://org/gpt2"])
    commit = ng.commit_of("org", "gpt2", "v1")
    folder_case("hf: @<commit sha> reads that commit", f"hf://org/gpt2@{commit}", "m/hub/org/gpt2/v1",
                [f"hf://org/gpt2@{commit}", "hf://org/gpt2"])
    folder_case("hf: a paginated tree listing (page size 2, Link rel=next) is followed", "hf://org/paged", "m/hub/org/paged/main",
                ["hf://org/paged", "hf://org/paged@main"],
                lambda c, entries: c.expect(any("cursor=" in e["uri"] for e in entries),
                                            f"no request followed the Link header: {[e['uri'] for e in entries if '/api/' in e['uri']]}"))
    folder_case("hf: a folder inside a repo (hf://org/nested/bert, paginated)", "hf://org/nested/bert", "m/hub/org/nested/main/bert",
                ["hf://org/nested/bert", "hf://org/nested@main/bert"])

    url = "hf://org/gated/model.safetensors"
    loc = "m/hub/org/gated/main/model.safetensors"
    if T.wanted("hf: gated"):
        with T.case("hf: gated repo without HF_TOKEN: exit 4, one line naming the URL and HF_TOKEN") as c:
            r = T.run(["summary", "--json", url], env)
            T.error(c, r, url, (4,), "HF_TOKEN")
        with T.case("hf: gated repo with a wrong HF_TOKEN: exit 4, the token never printed") as c:
            r = T.run(["summary", url], T.env(**{**{k: env[k] for k in ("SSL_CERT_FILE", "HF_ENDPOINT")}, "HF_TOKEN": wrong_token}))
            T.error(c, r, url, (4,), "HF_TOKEN")
        with T.case("hf: gated repo with HF_TOKEN: the file's summary and check; the token never printed nor sent to the CDN") as c:
            tenv = T.env(**{**{k: env[k] for k in ("SSL_CERT_FILE", "HF_ENDPOINT")}, "HF_TOKEN": hf_token})
            seen = log_slice(lambda: hub_log(ng))
            r = T.run(["summary", "--json", url], tenv)
            entries = seen()
            if T.ok(c, r):
                got = T.docs(c, r)
                lr = T.run(["summary", "--json", loc], T.base_env)
                T.same(c, f"summary --json {url}", got, [url, "hf://org/gated@main/model.safetensors"], T.docs(c, lr), [loc])
                rem = T.remote_obj(c, r, got[0], url) if got else None
                if rem:
                    c.expect(rem["requests"] == len(entries), f"{r}: remote.requests {rem['requests']}, the Hub and CDN saw {len(entries)}")
            c.expect(any(e["server"] == "hub" and e["auth"] == "1" for e in entries), "the Hub never got the token")
            c.expect(all(e["auth"] == "0" for e in entries if e["server"] == "cdn"), "the token reached the CDN")
            r = T.run(["check", "--json", url], tenv)
            T.clean(c, r)
            c.expect(r.rc in (0, 1), f"{r}: check failed")
            r = T.run(["diff", url, loc], tenv)
            if T.ok(c, r):
                c.expect("same:" in r.out, f"{r}: diff does not say 'same:'")
    if T.wanted("hf: isolated"):
        with T.case("hf: a folder whose listing is refused (401) is one failed input: the local file after it is still read") as c:
            folder = "hf://org/gated"
            r = T.run(["summary", "--jsonl", folder, loc], env)
            T.clean(c, r)
            c.expect(r.rc == 4, f"{r}: expected exit 4 (the worst)")
            docs = [json.loads(l) for l in r.out.splitlines() if l.strip()]
            c.expect([d.get("schema") for d in docs] == ["ckpt.error/1", "ckpt.summary/1"], f"{r}: documents {docs}")
            if docs and docs[0].get("schema") == "ckpt.error/1":
                c.expect(docs[0].get("exit") == 4 and "HF_TOKEN" in docs[0].get("error", ""), f"{r}: {docs[0]}")
            c.expect(len(r.err.splitlines()) == 1, f"{r}: expected one stderr line")
    if T.wanted("hf: missing"):
        with T.case("hf: a file the repo does not have: exit 3, one line naming the URL") as c:
            u = "hf://org/files/nope.safetensors"
            T.error(c, T.run(["summary", u], env), u, (3,))
        with T.case("hf: a revision the repo does not have: exit 3, one line naming the URL") as c:
            u = "hf://org/files@nope/model.safetensors"
            T.error(c, T.run(["summary", u], env), u, (3,))


def cases_side_files(T, ng, envs, **_):
    """A malicious pickle beside the weights of an hf:// model folder: found by its name in the listing and
    scanned through the block cache; files no name marks, and sub-folders, are never fetched."""
    name = "hf: side files: a malicious optimizer.pt beside model.safetensors fails check; unnamed files are not fetched"
    if not T.wanted(name):
        return
    env, url = envs["hf"], "hf://org/sidecar"
    with T.case(name) as c:
        seen = log_slice(lambda: hub_log(ng))
        r = T.run(["check", "--json", url], env)
        T.clean(c, r)
        c.expect(r.rc == 1, f"{r}: expected exit 1")
        docs = T.docs(c, r)
        files = sorted({l["file"] for d in docs for f in d.get("findings", []) for l in f["locations"] if l["file"]})
        c.expect(files == ["optimizer.pt"], f"{r}: findings in {files}, want optimizer.pt only")
        uris = [e["uri"] for e in seen()]
        c.expect(not any(u.split("?")[0].endswith(("/blob", "/sub/extra.pt")) for u in uris), f"{r}: fetched {uris}")
        r = T.run(["summary", "--json", url], env)
        T.clean(c, r)
        docs = T.docs(c, r)
        side = docs[0].get("side_files") if docs else None
        c.expect(side == [{"path": "optimizer.pt", "size": 34, "kind": "pickle"},
                          {"path": "rng_state.pth", "size": 14327, "kind": "zip"}], f"{r}: side_files {side}")


def cases_s3(T, s3, envs, wrong_secret, temp_secret, session_token, **_):
    env = envs["s3"]

    def dir_case(cname, url, loc, prefixes, e=None):
        if not T.wanted(cname):
            return
        with T.case(cname) as c:
            r = T.run(["summary", "--jsonl", url], e or env)
            if T.ok(c, r):
                lr = T.run(["summary", "--jsonl", loc], T.base_env)
                T.same(c, f"summary --jsonl {url}", T.docs(c, r), prefixes, T.docs(c, lr), [loc])

    dir_case("s3: s3://ckpt/models/ (a prefix of several files) is the local directory", "s3://ckpt/models/", "m/s3/ckpt/models", ["s3://ckpt/models"])
    # (the local folder given as the URL is, with its slash: JSON's `file` is the operand as given)
    dir_case("s3: s3://ckpt/hf/bert_enc/ (a sharded HF folder) is the local folder", "s3://ckpt/hf/bert_enc/", "m/s3/ckpt/hf/bert_enc/", ["s3://ckpt/hf/bert_enc"])
    url = "s3://ckpt/models/model.safetensors"
    loc = "m/s3/ckpt/models/model.safetensors"
    creds = {k: env[k] for k in ("AWS_ENDPOINT_URL", "AWS_REGION")}
    if T.wanted("s3: wrong secret"):
        with T.case("s3: wrong secret: exit 4, one line naming the s3:// URL, the secret never printed") as c:
            r = T.run(["summary", "--json", url], T.env(**creds, AWS_ACCESS_KEY_ID="CKPTTEST", AWS_SECRET_ACCESS_KEY=wrong_secret))
            T.error(c, r, url, (4,))
            c.expect(any(e.get("error") == "SignatureDoesNotMatch" for e in s3.requests), "the gateway saw no SignatureDoesNotMatch")
    if T.wanted("s3: no credentials"):
        with T.case("s3: no credentials at all: exit 4, one line naming the s3:// URL") as c:
            T.error(c, T.run(["summary", url], T.env(**creds)), url, (4,))
    if T.wanted("s3: missing"):
        with T.case("s3: a key that does not exist: exit 3, one line naming the URL") as c:
            u = "s3://ckpt/models/nope.pt"
            T.error(c, T.run(["summary", u], env), u, (3,))
        with T.case("s3: a bucket that does not exist: exit 3, one line naming the URL") as c:
            u = "s3://nobucket/models/sd_compiled_211.pt"
            T.error(c, T.run(["summary", u], env), u, (3,))
    def cred_case(cname, e):
        if not T.wanted(cname):
            return
        with T.case(cname) as c:
            r = T.run(["summary", "--json", url], e)
            if T.ok(c, r):
                lr = T.run(["summary", "--json", loc], T.base_env)
                T.same(c, f"summary --json {url}", T.docs(c, r), [url], T.docs(c, lr), [loc])

    home = os.path.join(T.tmp, "home-aws")  # a HOME of its own: the other cases see no ~/.aws
    aws = os.path.join(home, ".aws")
    os.makedirs(aws, exist_ok=True)
    with open(os.path.join(aws, "credentials"), "w") as f:
        f.write("[default]\naws_access_key_id = NOPE\naws_secret_access_key = nope\n\n"
                "[ckpt-test]\naws_access_key_id = CKPTTEST\naws_secret_access_key = CKPTTEST\n")
    cred_case("s3: credentials from ~/.aws/credentials, profile AWS_PROFILE=ckpt-test",
              T.env(**creds, HOME=home, AWS_PROFILE="ckpt-test"))
    other = os.path.join(home, "elsewhere-credentials")
    with open(other, "w") as f:
        f.write("[default]\naws_access_key_id = CKPTTEST\naws_secret_access_key = CKPTTEST\n")
    cred_case("s3: credentials from AWS_SHARED_CREDENTIALS_FILE ([default])", T.env(**creds, AWS_SHARED_CREDENTIALS_FILE=other))
    cred_case("s3: session credentials (AWS_SESSION_TOKEN -> x-amz-security-token)",
              T.env(**creds, AWS_ACCESS_KEY_ID="TEMPKEY", AWS_SECRET_ACCESS_KEY=temp_secret, AWS_SESSION_TOKEN=session_token))


def cases_large(T, ng, envs, have_large, large, **_):
    if not have_large or not T.wanted("large"):
        return
    url = f"{ng.http_url}/large.pt"
    env = envs["http"]
    size = os.path.getsize(large)
    for cmd in ("summary", "check"):
        with T.case(f"large: {cmd} of a {size >> 20} MiB torch.save zip over http://: <= 3 requests, <= 1 MiB, ranges only") as c:
            seen = log_slice(lambda: ng.requests("http"))
            r = T.run([cmd, "--json", url], env)
            entries = [e for e in seen() if e["uri"] == "/large.pt"]
            if cmd == "summary":
                ok = T.ok(c, r)
            else:
                ok = T.clean(c, r) and c.expect(r.rc in (0, 1), f"{r}: check failed")
            if ok:
                docs = T.docs(c, r)
                lr = T.run([cmd, "--json", os.path.relpath(large, T.tmp)], T.base_env)
                T.same(c, f"{cmd} --json {url}", docs, [url], T.docs(c, lr), [os.path.relpath(large, T.tmp)])
                if cmd == "summary" and docs:
                    rem = T.remote_obj(c, r, docs[0], url)
                    if rem:
                        c.expect(rem["requests"] <= 3, f"{r}: {rem['requests']} requests, want <= 3")
                        c.expect(rem["bytes"] <= MiB, f"{r}: {rem['bytes']} bytes fetched, want <= 1 MiB")
            full = [e for e in entries if e["method"] == "GET" and not e["range"]]
            c.expect(not full, f"nginx saw {len(full)} GET without Range for /large.pt")
            c.expect(all(e["status"] in (206, 304) or e["method"] == "HEAD" for e in entries),
                     f"statuses {[e['status'] for e in entries]}")
            sent = sum(e["bytes"] for e in entries)
            c.expect(sent <= MiB, f"nginx sent {sent} bytes of /large.pt, want <= 1 MiB")
            c.expect(len(entries) <= 3, f"nginx saw {len(entries)} requests for /large.pt, want <= 3")


def zip_layout(path):
    """(data.pkl's size, the central directory's and end records' size) of a torch.save zip, by zipfile."""
    with zipfile.ZipFile(path) as z:
        pkl = next(i for i in z.infolist() if i.filename.endswith("/data.pkl"))
        return pkl.compress_size, os.path.getsize(path) - z.start_dir


def byte_span(rng, size):
    """The bytes [first, last] a `bytes=A-B` or `bytes=-N` header asks of a file of `size` bytes."""
    a, b = rng[len("bytes="):].split("-")
    return (max(0, size - int(b)), size - 1) if a == "" else (int(a), min(int(b), size - 1) if b else size - 1)


def cases_many(T, ng, envs, have_large, many, big_header, **_):
    """A torch.save zip of 1k, 10k, 100k small tensors: a summary fetches its end records, central directory and
    data.pkl in at most 3 ranged requests whatever their size, no byte twice, at most 512 KiB more than those."""
    if not have_large:
        return
    for n, path in many.items():
        name = os.path.basename(path)
        pkl, end = zip_layout(path)
        for tname, url, log in (("http", f"{ng.http_url}/{name}", lambda: ng.requests("http")), ("hf", f"hf://org/many/{name}", lambda: hub_log(ng))):
            cname = f"many: summary of a torch.save zip of {n} tensors over {tname}: <= 3 ranged requests, <= data.pkl + directory + 512 KiB"
            if not T.wanted(cname):
                continue
            with T.case(cname) as c:
                seen = log_slice(log)
                r = T.run(["summary", "--json", url], envs[tname])
                if not T.ok(c, r):
                    continue
                # (the schema is checked on the other files: here, 50 MB of JSON at 100k tensors, it costs a minute)
                docs = json_docs(r.out)
                lr = T.run(["summary", "--json", os.path.relpath(path, T.tmp)], T.base_env)
                T.same(c, f"summary --json {url}", docs, [url], json_docs(lr.out), [os.path.relpath(path, T.tmp)])
                entries = seen()
                data = [e for e in entries if e["status"] == 206]  # the file's bytes (not the listing, not the Hub's 302)
                c.expect(len(data) <= 3, f"{r}: {len(data)} ranged requests, want <= 3: {[e['range'] for e in data]}")
                if tname == "hf":
                    other = [e for e in entries if e["status"] != 206]
                    c.expect(len(other) <= 1 + len(data), f"{r}: besides the ranges, {[(e['uri'][:50], e['status']) for e in other]}")
                sent = sum(e["bytes"] for e in data)
                c.expect(sent <= pkl + end + 512 * 1024, f"{r}: {sent} bytes sent for data.pkl {pkl} + directory {end} + 512 KiB")
                size = os.path.getsize(path)
                spans = sorted(byte_span(e["range"], size) for e in data)
                c.expect(all(a[1] < b[0] for a, b in zip(spans, spans[1:])), f"{r}: a byte asked twice: {[e['range'] for e in data]}")
                rem = T.remote_obj(c, r, docs[0], url) if docs else None
                if rem:
                    c.expect(rem["requests"] == len(entries), f"{r}: remote.requests {rem['requests']}, the server saw {len(entries)}")
    # safetensors: the first request asks for what huggingface_hub's get_safetensors_metadata does (100 kB), the second
    # for the rest of the header exactly (its size is in the first 8 bytes)
    with open(big_header, "rb") as f:
        header_end = 8 + int.from_bytes(f.read(8), "little")
    name = os.path.basename(big_header)
    for tname, url, log in (("http", f"{ng.http_url}/{name}", lambda: ng.requests("http")), ("hf", f"hf://org/many/{name}", lambda: hub_log(ng))):
        with T.case(f"many: summary of a safetensors file with a {header_end >> 10} KiB header over {tname}: 100,000 bytes, then the header's rest") as c:
            seen = log_slice(log)
            r = T.run(["summary", "--json", url], envs[tname])
            if T.ok(c, r):
                lr = T.run(["summary", "--json", os.path.relpath(big_header, T.tmp)], T.base_env)
                T.same(c, f"summary --json {url}", T.docs(c, r), [url], T.docs(c, lr), [os.path.relpath(big_header, T.tmp)])
                got = [e["range"] for e in seen() if e["status"] == 206]
                c.expect(got == ["bytes=0-99999", f"bytes=100000-{header_end - 1}"], f"{r}: ranges {got}")


class Row:
    """One hostile-server case: the misbehaving server's behaviour (`kind`, servers.KINDS) serving `file`;
    `args` before the URL (`summary --json` runs when `want` is "ok", else `summary`); `want`: "ok" (exit 0,
    the JSON equal to the local file's, remote.requests equal to the server's count) or (exit codes, stderr
    patterns) for one error line naming the URL; `secs`: the bound the case must end in (2x its documented
    limit, or a few seconds); `reqs`: the most requests the server may see; `url`/`env`: another spelling of
    the input (s3:// against the server, a URL with user:password@) and its environment; `more(c, r, entries,
    ctx)`: what else must hold; `whole`: the file is needed whole (a server that ignores Range). Every case
    must also peak at most 64 MiB of RSS above the bytes it needs, over a local summary's peak in the same run."""

    def __init__(self, name, kind, file, want, args=(), secs=20, reqs=None, url=None, env=None, more=None, whole=False):
        self.name, self.kind, self.file, self.want, self.args, self.whole = name, kind, file, want, tuple(args), whole
        self.secs, self.reqs, self.url, self.env, self.more = secs, reqs, url, env, more


ST, MED = "model.safetensors", "medium.pt"


def _retried(status):
    def more(c, r, entries, ctx):
        st = [e["status"] for e in entries]
        c.expect(len(entries) >= 2 and st[0] == status, f"server log: {st}")
    return more


def _busy(c, r, entries, ctx):
    st = [e["status"] for e in entries]
    if c.expect(len(entries) >= 2 and st[0] == 429, f"server log: {st}"):
        c.expect(entries[1]["t"] - entries[0]["t"] >= 0.9, f"the retry came {entries[1]['t'] - entries[0]['t']:.2f} s after the 429 (Retry-After: 1)")


def _several(c, r, entries, ctx):
    c.expect(len(entries) >= 2, f"only {len(entries)} request(s): the file must need several ranges for this case")


def _no_if_range(c, r, entries, ctx):
    _several(c, r, entries, ctx)
    c.expect(all(e["if_range"] is None for e in entries), f"If-Range sent: {[e['if_range'] for e in entries]}")


def _bounded_body(c, r, entries, ctx):
    c.expect(entries and max(e["bytes"] for e in entries) < (4 << 20), f"server sent {[e['bytes'] for e in entries]} bytes")


def _no_credentials_elsewhere(c, r, entries, ctx):
    """The second server (another port) was reached, and never with a credential."""
    seen = ctx["other"].requests[ctx["other_n0"]:]
    c.expect(seen, "the redirect to the second server was not followed")
    leaked = [(e["path"], e["creds"]) for e in seen if e["creds"]]
    c.expect(not leaked, f"credentials sent to the second host: {leaked[:3]}")
    c.expect(all(e["creds"] for e in entries if e["method"] == "GET") or not ctx.get("signed"),
             f"the first host saw no credentials: {[e['creds'] for e in entries]}")


def _unverified(c, r, entries, ctx):
    _several(c, r, entries, ctx)
    c.expect(re.search(r"ckpt: warning: .*neither a strong ETag nor Last-Modified", r.err), f"{r}: no warning that changes went unchecked")
    docs = json_docs(r.out) if r.rc == 0 else []
    rem = docs[0].get("remote", {}) if docs else {}
    c.expect(rem.get("unverified") == 1, f"{r}: remote.unverified {rem.get('unverified')!r}, want 1")


def _s3_env(ctx, **kw):
    return ctx["T"].env(AWS_ENDPOINT_URL=ctx["bad"].url, AWS_ACCESS_KEY_ID="CKPTTEST", AWS_SECRET_ACCESS_KEY=ctx["temp_secret"],
                        AWS_SESSION_TOKEN=ctx["session_token"], AWS_REGION="us-east-1", **kw)


HOSTILE = [
    Row("404", "missing", ST, ((3,), ()), secs=10, reqs=1),
    Row("401", "auth", ST, ((4,), ()), secs=10, reqs=1),
    Row("403", "forbidden", ST, ((4,), ()), secs=10, reqs=1),
    Row("flaky (a 500 on the first try of each range)", "flaky", MED, "ok", more=_retried(500)),
    Row("busy (a 429 with Retry-After: 1 once)", "busy", ST, "ok", more=_busy),
    Row("norange: refused, naming --limit", "norange", MED, ((3, 4), (r"range", r"--limit")), secs=10, reqs=1),
    Row("norange: --limit download-bytes=100M takes it whole, once", "norange", MED, "ok", args=("--limit", "download-bytes=100M"), reqs=1,
        whole=True),
    Row("etag: the file changes between requests", "etag", MED, ((3, 4), (r"chang",)), more=_several),
    Row("lmchange: no ETag, a new Last-Modified and new bytes (same size)", "lmchange", MED, ((3, 4), (r"changed.*Last-Modified",)), more=_several),
    Row("novalidator: neither ETag nor Last-Modified: read, and said so", "novalidator", MED, "ok", more=_unverified),
    Row("endless404: a 404 whose body never ends", "endless404", ST, ((3,), ()), secs=10, reqs=1, more=_bounded_body),
    Row("ctletag: an ETag holding a bare CR is never sent back", "ctletag", MED, "ok", more=_no_if_range),
    Row("stall: no byte of the body, --limit stall-seconds=2", "stall", ST, ((4,), (r"stall",)), args=("--limit", "stall-seconds=2"), secs=4),
    Row("drip206: a 206 at 2 bytes/s, --limit stall-seconds=2", "drip206", ST, ((4,), (r"low-speed|stall",)), args=("--limit", "stall-seconds=2"), secs=4),
    Row("drip404: a 404 body at 2 bytes/s, --limit stall-seconds=2", "drip404", ST, ((4,), (r"low-speed|stall",)), args=("--limit", "stall-seconds=2"), secs=4),
    Row("slowloris: 2 KiB/s (above low-speed), --limit request-seconds=2", "slowloris", ST, ((4,), (r"request-seconds",)),
        args=("--limit", "request-seconds=2"), secs=4),
    Row("reset: a connection reset once", "reset", MED, "ok", more=_retried("reset")),
    Row("shortonce: a body cut short once", "shortonce", ST, "ok", more=_several),
    Row("short: a body always cut short", "short", ST, ((4,), (r"cut short|transfer closed",)), secs=30),
    Row("endless302: a redirect whose body never ends is followed", "endless302", ST, "ok", secs=10, more=_bounded_body),
    Row("loop: a redirect loop", "loop", ST, ((3,), (r"too many redirects",)), secs=10, reqs=11),
    Row("scheme: a redirect to file://", "scheme", ST, ((3,), (r"not http",)), secs=10, reqs=1),
    Row("api: an HF repo listing whose pages never end: refused at the cap", "api", "", ((3,), (r"listing exceeds",)), secs=30, reqs=101,
        url=lambda ctx, u: "hf://org/endless", env=lambda ctx: ctx["T"].env(HF_ENDPOINT=ctx["bad"].url)),
    Row("redirect: http://user:password@ to another host: no credential follows", "redirect", ST, "ok", reqs=1,
        url=lambda ctx, u: u.replace("://", f"://u:{ctx['url_password']}@", 1), more=_no_credentials_elsewhere),
    Row("redirect: s3:// object (SigV4 and session token) to another host: no credential follows", "redirect", ST, "ok", reqs=1,
        url=lambda ctx, u: "s3://redirect/" + ST, env=_s3_env, more=_no_credentials_elsewhere),
    Row("redirect: s3:// listing to another host: no credential follows", "redirect", "", ((3,), ()), reqs=1,
        url=lambda ctx, u: "s3://redirect/", env=_s3_env, more=_no_credentials_elsewhere),
]


def cases_hostile(T, bad, other, envs, medium, files, temp_secret, session_token, **_):
    """Every row of HOSTILE against the misbehaving server (and, for redirects, a second one on another port)."""
    local = {MED: os.path.relpath(medium, T.tmp), ST: "m/www/model.safetensors"}
    ctx = dict(T=T, bad=bad, other=other, temp_secret=temp_secret, session_token=session_token, url_password="pw" + os.urandom(5).hex())
    T.secrets.add(ctx["url_password"])
    base = T.run_measured(["summary", local[ST]], T.base_env).rss  # this build's own footprint (ASan's is ~90 MiB)
    for row in HOSTILE:
        name = f"hostile: {row.name}"
        if not T.wanted(name):
            continue
        with T.case(name) as c:
            u = bad.url_for(row.kind, row.file)
            u = row.url(ctx, u) if row.url else u
            env = row.env(ctx) if row.env else envs["http"]
            ctx["signed"] = row.env is not None
            n0, ctx["other_n0"] = len(bad.requests), len(other.requests)
            ok = row.want == "ok"
            r = T.run_measured(["summary", *(("--json",) if ok else ()), *row.args, u], env, timeout=max(60, 3 * row.secs))
            need = os.path.getsize(os.path.join(T.tmp, local[row.file])) if row.whole else 0
            c.expect(r.rss <= base + (64 << 10) + need / 1024,
                     f"{r}: peak RSS {r.rss / 1024:.1f} MiB, more than 64 MiB above the {need} bytes it needs (a local summary: {base / 1024:.1f} MiB)")
            if row.whole:  # held once: a second copy of the file would pass the bound above
                c.expect(r.rss <= base + (12 << 10) + need / 1024,
                         f"{r}: peak RSS {r.rss / 1024:.1f} MiB for a whole download of {need} bytes: held twice? (a local summary: {base / 1024:.1f} MiB)")
            entries = [e for e in bad.requests[n0:] if e["kind"] == row.kind and (not row.file or e["name"] == row.file)]
            c.expect(r.secs <= row.secs, f"{r}: took {r.secs:.1f} s, the bound is {row.secs} s")
            if row.reqs is not None:
                c.expect(len(entries) <= row.reqs, f"{r}: the server saw {len(entries)} requests, at most {row.reqs} wanted")
            if ok:
                if T.ok(c, r):
                    docs = T.docs(c, r)
                    lr = T.run(["summary", "--json", *row.args, local[row.file]], T.base_env)
                    T.same(c, f"summary --json {u}", docs, [u, vfs_display(u)], T.docs(c, lr), [local[row.file]])
                    rem = T.remote_obj(c, r, docs[0], vfs_display(u)) if docs else None
                    seen = [e for e in bad.requests[n0:] if e["name"] == row.file]  # a redirect's target on this server too
                    if rem and not row.url:
                        c.expect(rem["requests"] == len(seen), f"{r}: remote.requests {rem['requests']}, the server saw {len(seen)}")
            else:
                T.error(c, r, vfs_display(u), row.want[0], *row.want[1])
            if row.more:
                row.more(c, r, entries, ctx)


def vfs_display(url):
    """The URL as ckpt names it: user:password@ dropped (the rest of these URLs carries no secret)."""
    return re.sub(r"://[^/@]*@", "://", url, count=1)


def cases_secrets(T, bad, envs, **_):
    env = envs["http"]
    if T.wanted("secrets"):
        with T.case("secrets: a URL's password and query secrets appear in no command's output, in any format") as c:
            pw, sid = "pw" + os.urandom(5).hex(), "sid" + os.urandom(5).hex()
            T.secrets |= {pw, sid}
            u = bad.url_for("ok", "model.safetensors").replace("://", f"://user:{pw}@", 1) + f"?sessionid={sid}&download=1"
            runs = [["summary", u], ["summary", "--json", u], ["summary", "--jsonl", u], ["summary", "--format", "markdown", u],
                    ["check", u], ["check", "--json", u], ["check", "--format", "sarif", u], ["diff", u, u],
                    ["diff", "--json", u, u], ["diff", "--values", u, u], ["load", "--device", "meta", u],
                    ["load", "--device", "meta", "--json", u], ["load", "--device", "meta", "--jsonl", u, u],
                    ["summary", "--jsonl", u.replace("/ok/", "/missing/")], ["load", "--device", "meta", u.replace("/ok/", "/missing/")]]
            for args in runs:
                r = T.run(args, env)
                T.clean(c, r)
                no_torch = args[0] == "load" and r.rc == 4 and "needs ckpt-torch" in r.err  # a build without LibTorch
                c.expect(r.rc in (0, 1, 3) or no_torch, f"{r}: exit {r.rc}")


def cases_tls(T, ng, envs, **_):
    if not T.wanted("tls"):
        return
    for url in (f"{ng.https_url}/model.safetensors", "hf://org/files/model.safetensors"):
        with T.case(f"tls: {url.split(':')[0]}:// with a self-signed certificate and no SSL_CERT_FILE: exit 4 naming the certificate") as c:
            r = T.run(["summary", url], T.env(HF_ENDPOINT=ng.hub_url))
            T.error(c, r, url, (4,), r"certificate|TLS|SSL")
        with T.case(f"tls: {url.split(':')[0]}:// with SSL_CERT_FILE naming another CA bundle: exit 4") as c:
            other = "/etc/ssl/certs/ca-certificates.crt"
            if os.path.exists(other):
                r = T.run(["summary", url], T.env(HF_ENDPOINT=ng.hub_url, SSL_CERT_FILE=other))
                T.error(c, r, url, (4,), r"certificate|TLS|SSL")


if __name__ == "__main__":
    sys.exit(main())
