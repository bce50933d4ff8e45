#!/usr/bin/python3
"""Real servers on 127.0.0.1 for the remote-input tests (tests/remote/remote_cases.py): stdlib only.

Each class is a context manager that starts its servers on free ephemeral ports of 127.0.0.1, in a
temporary directory of its own, and stops them on exit, also on an exception (and the child processes
get SIGTERM if this process dies: PR_SET_PDEATHSIG).

Nginx (`NginxServers`; Debian's nginx-light, /usr/sbin/nginx, run as the current user: every path it
writes is inside its temporary directory; as root, its worker runs as root too):
  - `http_url`: plain HTTP serving the files given to `add_file` (static files: Range, 206, a strong
    ETag "mtime-size", If-Range; a Range nginx cannot satisfy is a 416);
  - `https_url`: the same files over HTTPS (certificate below);
  - `hub_url`: HTTPS with a self-signed certificate (`cert`, for SSL_CERT_FILE / CURL_CA_BUNDLE: made with
    `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 -subj /CN=127.0.0.1
    -addext subjectAltName=IP:127.0.0.1`) in the layout of the Hugging Face Hub for the repos given to
    `add_hf_repo` (HF_ENDPOINT=hub_url):
      GET /ORG/REPO/resolve/REV/PATH
          an LFS file (by extension: .safetensors .bin .pt .pth .ckpt .pt2 .distcp ... or lfs=True) is a
          302 to the CDN (below) with the Hub's headers X-Repo-Commit, X-Linked-Size, X-Linked-Etag
          ("sha256") and ETag; a small git file (config.json, the index) is served by the Hub itself
          (200/206, Range, ETag, X-Repo-Commit), as huggingface.co does;
      GET /api/models/ORG/REPO/tree/REV[/PATH]   (PATH may come %2F-encoded, as huggingface_hub sends it)
          the Hub's JSON array: {"type":"file","oid":<git blob sha1>,"size":N,"path":"a/b"} and for LFS
          files also "lfs":{"oid":<sha256>,"size":N,"pointerSize":P} and "xetHash"; folders
          {"type":"directory","oid":<sha1>,"size":0,"path":"a"}. Directories first, then files (the Hub
          does not promise an order: a client sorts). `?recursive=true|True|1` lists everything under
          PATH (folders included), anything else only its direct children; `expand` is ignored. A repo
          with `page_size` paginates as the Hub does: `Link: <URL&cursor=p2>; rel="next"` on every page but
          the last (huggingface_hub's `paginate` follows `response.links["next"]`);
      GET /api/models/ORG/REPO[/revision/REV]  model info: {"id", "sha", "private", "gated", "siblings": [{"rfilename"}]}
      REV is a branch/tag given to add_hf_repo or the fake 40-hex commit of it (`commit_of`).
      Access: "public"; "gated" (listing and model info open; resolve needs `Authorization: Bearer
      <token>`, else 401 with X-Error-Code: GatedRepo); "private" (everything needs the token, else 401
      X-Error-Code: RepoNotFound, as the Hub answers for a repo it will not admit to). A repo the Hub does
      not know: 401 RepoNotFound without Authorization, 404 with one (the Hub's rule). Unknown revision:
      404 RevisionNotFound; unknown path: 404 EntryNotFound. Error bodies are {"error": "..."}.
  - `cdn_url`: HTTPS (same certificate) standing in for cdn-lfs.hf.co: GET /repos/xx/yy/<sha256>?...
    serves the LFS file by its sha256 with Range; it answers 403 to any request that carries an
    Authorization header (a client must drop the token when the redirect changes host or port) and to
    one without the signed query (`Expires`, `Signature`: the redirect's query must be kept).
  Every request is in `requests()` (nginx's access log as JSON lines: port, server, method, uri, status,
  bytes, range, if_range, auth (an Authorization header was sent: "1"/"0", never its value)).

S3 (`S3Server`): moto's server mode (`moto_server`, PyPI, pinned with hashes in
tests/remote/requirements-s3.txt; scripts/deps.sh installs it into the virtual environment build-venv/s3/,
or CKPT_MOTO_SERVER names another) behind `S3Gateway`, a SigV4-checking reverse proxy of ours. What we
found about moto 5.2.5 in server mode (checked with the curl CLI):
  - it does NOT verify AWS Signature V4 (only when INITIAL_NO_AUTH_ACTION_COUNT is set, and then against
    its IAM backend): any Authorization header is accepted, and a GET or HEAD of an object from 127.0.0.1
    WITHOUT one is a bare 403 with an empty text/html body (not S3's XML);
  - Range: `bytes=A-B`, `bytes=A-` and the suffix form `bytes=-N` give a correct 206 with Content-Range,
    ETag (the object's MD5, quoted) and Accept-Ranges: bytes; a start past the end and `bytes=-0` are 416
    InvalidRange; several ranges give a 200 with the whole object, as S3 does. If-Match is honoured (412);
    If-Range is ignored;
  - ListObjectsV2 (`GET /BUCKET?list-type=2&prefix=P&delimiter=/`, also max-keys / continuation-token /
    start-after) answers S3's <ListBucketResult> (S3's xmlns) with Contents, CommonPrefixes, KeyCount,
    IsTruncated and NextContinuationToken;
  - path-style URLs work on 127.0.0.1 (http://127.0.0.1:PORT/BUCKET/KEY); it answers `Connection: close`
    (Werkzeug's development server, one thread per request), and takes about a second to start.
So that a wrong secret is refused as S3 refuses it, `S3Gateway` (the `endpoint` the tests use) checks
SigV4 itself (Authorization header or presigned query; credentials, optional session token, the region,
the 15-minute window, x-amz-content-sha256 present and equal to the body's hash) and answers S3's XML
errors: 403 AccessDenied (no credentials), 403 InvalidAccessKeyId, 403 SignatureDoesNotMatch (with the
<CanonicalRequest> and <StringToSign> it computed, as S3 does), 403 InvalidToken, 400
AuthorizationHeaderMalformed (wrong region), 400 InvalidRequest (no x-amz-content-sha256), 400
XAmzContentSHA256Mismatch, 403 RequestTimeTooSkewed. It then forwards to moto with an Authorization header
of its own (moto admits any), and checks If-Match itself (412 PreconditionFailed in S3's XML). Every
request is in `requests` (method, path, query, range, auth, status).

Misbehaving HTTP (`MisbehavingServer`, http.server, HTTP/1.1, correct Content-Length): the files given
are served under /KIND/NAME where KIND is one of
  ok (Range/206/416, strong ETag, If-Range, HEAD), missing (404), auth (401, WWW-Authenticate),
  forbidden (403), flaky (the first request of each distinct (method, Range) is a 500, the retry
  works), busy (the first request of the file is a 429 with Retry-After: 1), norange (Range ignored: 200
  and the whole body, Accept-Ranges: none), etag (the ETag changes after the first request; an If-Range
  that no longer matches gets a 200 with the whole body, RFC 9110 13.1.5), ctletag (an ETag holding a bare CR),
  endless404 (a 404 whose body never ends), and more (KINDS); /api/...: an HF tree listing without end,
  stall (206 status and headers,
  then no body byte for `stall_seconds`, connection left open), reset (the first request of the file:
  connection closed with a TCP RST and no response; then ok), short (a 206/200 whose body stops halfway
  before Content-Length, connection closed; every time), shortonce (short on the first request, then ok).
  Every request is in `requests` (kind, name, method, path, range, if_range, auth, status, time).

Run `python3 tests/remote/servers.py --selftest` to start everything and check each behaviour with the
curl CLI (exit 0; 1 on a failure; 77 when a server program is missing and CKPT_REMOTE_OPTIONAL=1);
`--serve` starts them with a few testdata files and prints the URLs and environment until Ctrl-C.
"""

import argparse
import calendar
import contextlib
import ctypes
import email.utils
import hashlib
import hmac
import http.client
import http.server
import io
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from xml.sax.saxutils import escape as xml_escape

HERE = os.path.dirname(os.path.abspath(__file__))
NGINX = os.environ.get("CKPT_NGINX", "/usr/sbin/nginx")
ROOT = os.path.dirname(os.path.dirname(HERE))
# moto's server (scripts/deps.sh: pip install --require-hashes -r tests/remote/requirements-s3.txt)
MOTO_SERVER = os.environ.get("CKPT_MOTO_SERVER", os.path.join(ROOT, "build-venv", "s3", "bin", "moto_server"))
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class Unavailable(RuntimeError):
    """A server program this harness needs is not installed (nginx, moto_server, openssl, curl)."""


# ---------------------------------------------------------------------------------------------------
# helpers


def free_port():
    """A port of 127.0.0.1 free right now (the kernel's ephemeral choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def _pdeathsig():
    """preexec_fn: the child gets SIGTERM when this process dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)
    except OSError:
        pass


def start_process(args, log_path, cwd=None, env=None):
    log = open(log_path, "ab")
    try:
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                start_new_session=True, preexec_fn=_pdeathsig)
    finally:
        log.close()


def stop_process(proc, sig=signal.SIGTERM, timeout=5.0):
    """Stops a child started by start_process and everything in its process group."""
    if proc is None:
        return
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # its own group (start_new_session): workers left behind
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout)


def make_cert(directory):
    """A self-signed P-256 certificate for 127.0.0.1 (SAN IP:127.0.0.1): returns (cert, key) paths."""
    openssl = shutil.which("openssl")
    if not openssl:
        raise Unavailable("openssl not found")
    cert, key = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
    subprocess.run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True, timeout=60)
    return cert, key


def file_digests(path):
    """(size, git blob sha1, sha256) of a file."""
    size = os.path.getsize(path)
    g, s = hashlib.sha1(b"blob %d\0" % size), hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            g.update(chunk)
            s.update(chunk)
    return size, g.hexdigest(), s.hexdigest()


SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
SAFE_PATH = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")


def _check(value, pattern, what):
    if not pattern.match(value) or value in (".", "..") or "/../" in f"/{value}/" or "/./" in f"/{value}/":
        raise ValueError(f"{what} {value!r}: only letters, digits, . _ - (and / between path parts)")
    return value


class _HTTPServer(http.server.ThreadingHTTPServer):
    """ThreadingHTTPServer on 127.0.0.1:0 that tracks its connections so stop() can close them all."""
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, handler, owner):
        self.owner = owner
        self.conns = set()
        self.conns_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler)

    def process_request(self, request, client_address):
        with self.conns_lock:
            self.conns.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request):
        with self.conns_lock:
            self.conns.discard(request)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        # a client that hung up, a connection we reset on purpose: not an error of the test server
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, BrokenPipeError, TimeoutError, OSError, ValueError)):
            return
        super().handle_error(request, client_address)

    def close_all(self):
        with self.conns_lock:
            conns = list(self.conns)
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)


class _ThreadedServer:
    """Base of the Python servers: start() in a thread, stop() closes the listener and every connection."""

    handler = None

    def __init__(self):
        self.httpd = None
        self.thread = None
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.requests = []

    @property
    def port(self):
        return self.httpd.server_address[1]

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        self.httpd = _HTTPServer(self.handler, self)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.stopping.set()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.close_all()
            self.httpd.server_close()
            self.thread.join(5)
            self.httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def record(self, entry):
        with self.lock:
            self.requests.append(entry)
        return entry

    def clear_requests(self):
        with self.lock:
            self.requests.clear()


def parse_range(header, size):
    """A single `bytes=` range against a size: (first, last) inclusive; None when absent, several ranges or
    not understood (a server may then ignore it); "unsatisfiable" for a 416."""
    if not header:
        return None
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None
    a, b = m.group(1), m.group(2)
    if a == "":
        n = int(b)
        if n == 0 or size == 0:
            return "unsatisfiable"
        return max(0, size - n), size - 1
    first = int(a)
    last = size - 1 if b == "" else min(int(b), size - 1)
    if b != "" and int(b) < first:
        return None  # invalid: ignored (RFC 9110 14.1.1)
    if first >= size:
        return "unsatisfiable"
    return first, last


# ---------------------------------------------------------------------------------------------------
# nginx: plain HTTP, the Hub (HTTPS) and its CDN (HTTPS)

LFS_EXTENSIONS = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".pt2", ".ptl", ".distcp", ".pkl", ".zip", ".tar",
                  ".h5", ".msgpack", ".onnx", ".gguf", ".npz", ".npy", ".model")


class HFRepo:
    """One revision of a repo: files {path_in_repo: local file}."""

    def __init__(self, org, name, revision, files, access="public", page_size=None, lfs=None):
        self.org = _check(org, SAFE_NAME, "org")
        self.name = _check(name, SAFE_NAME, "repo")
        self.revision = _check(revision, SAFE_NAME, "revision")
        if access not in ("public", "gated", "private"):
            raise ValueError(f"access {access!r}")
        self.access = access
        self.page_size = page_size
        self.files = {}
        for p, local in sorted(files.items()):
            _check(p, SAFE_PATH, "path in repo")
            if not os.path.isfile(local):
                raise FileNotFoundError(local)
            is_lfs = lfs(p) if callable(lfs) else (p in lfs if lfs is not None else p.endswith(LFS_EXTENSIONS))
            self.files[p] = {"local": os.path.abspath(local), "lfs": bool(is_lfs)}
        self.commit = hashlib.sha1(f"commit {org}/{name}@{revision}".encode()).hexdigest()

    @property
    def repo_id(self):
        return f"{self.org}/{self.name}"


class _Managed:
    """`with X() as x`: start() on entry (stop() if it fails half-way), stop() on exit."""

    def __enter__(self):
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc):
        self.stop()


class NginxServers(_Managed):
    """nginx with three server blocks (plain HTTP files, the Hub over HTTPS, its CDN over HTTPS).

    Call add_file / add_hf_repo before start() (or entering the `with`)."""

    def __init__(self, tmp=None, hf_token=None):
        if not os.access(NGINX, os.X_OK):
            raise Unavailable(f"{NGINX} not found (Debian package nginx-light)")
        self._own_tmp = tmp is None
        self.dir = tmp or tempfile.mkdtemp(prefix="ckpt-nginx-")
        self.hf_token = hf_token or "hf_" + hashlib.sha256(os.urandom(16)).hexdigest()[:34]
        self.files = {}  # name -> local path (plain HTTP)
        self.repos = []  # HFRepo
        self.proc = None
        self.http_port = self.https_port = self.hub_port = self.cdn_port = None
        self.cert = self.key = None

    # configuration ----------------------------------------------------------------------------------
    def add_file(self, name, local):
        """Serve `local` at http_url/name (name may hold '/')."""
        _check(name, SAFE_PATH, "name")
        if not os.path.isfile(local):
            raise FileNotFoundError(local)
        self.files[name] = os.path.abspath(local)
        return f"/{name}"

    def add_hf_repo(self, org, name, revision, files, access="public", page_size=None, lfs=None):
        """One revision of a Hub repo; call again with another revision (other files) for more."""
        r = HFRepo(org, name, revision, files, access, page_size, lfs)
        for other in self.repos:
            if other.repo_id == r.repo_id:
                if other.revision == r.revision:
                    raise ValueError(f"{r.repo_id}@{r.revision} given twice")
                if other.access != r.access:
                    raise ValueError(f"{r.repo_id}: one access for all revisions")
        self.repos.append(r)
        return r

    def commit_of(self, org, name, revision):
        for r in self.repos:
            if (r.org, r.name, r.revision) == (org, name, revision):
                return r.commit
        raise KeyError(f"{org}/{name}@{revision}")

    @property
    def http_url(self):
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def https_url(self):
        return f"https://127.0.0.1:{self.https_port}"

    @property
    def hub_url(self):
        return f"https://127.0.0.1:{self.hub_port}"

    @property
    def cdn_url(self):
        return f"https://127.0.0.1:{self.cdn_port}"

    def port_name(self, port):
        return {self.http_port: "http", self.https_port: "https", self.hub_port: "hub", self.cdn_port: "cdn"}.get(int(port), str(port))

    # generated files --------------------------------------------------------------------------------
    def _layout(self):
        d = self.dir
        for sub in ("www", "cdn", "hub/api", "nginx", "tmp"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        for name, local in self.files.items():
            dst = os.path.join(d, "www", name)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if not os.path.lexists(dst):
                os.symlink(local, dst)
        self._digests = {}
        for r in self.repos:
            for p, f in r.files.items():
                if f["local"] not in self._digests:
                    self._digests[f["local"]] = file_digests(f["local"])
                size, blob, sha256 = self._digests[f["local"]]
                f.update(size=size, sha256=sha256)
                if f["lfs"]:
                    pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()
                    f["pointer_size"] = len(pointer)
                    f["oid"] = hashlib.sha1(b"blob %d\0" % len(pointer) + pointer).hexdigest()
                    cdn = os.path.join(d, "cdn", "repos", sha256[:2], sha256[2:4], sha256)
                    os.makedirs(os.path.dirname(cdn), exist_ok=True)
                    if not os.path.lexists(cdn):
                        os.symlink(f["local"], cdn)
                else:
                    f["oid"] = blob
            for rev in (r.revision, r.commit):
                self._write_trees(r, rev)

    def _entries(self, r):
        """Every entry of a repo revision: (path, entry dict), folders included."""
        dirs = set()
        for p in r.files:
            parts = p.split("/")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
        out = {}
        for dpath in dirs:
            below = sorted(p for p in r.files if p.startswith(dpath + "/"))
            oid = hashlib.sha1(("tree " + "\n".join(f"{p}:{r.files[p]['oid']}" for p in below)).encode()).hexdigest()
            out[dpath] = {"type": "directory", "oid": oid, "size": 0, "path": dpath}
        for p, f in r.files.items():
            e = {"type": "file", "oid": f["oid"], "size": f["size"]}
            if f["lfs"]:
                e["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": f["pointer_size"]}
                e["xetHash"] = hashlib.sha256(b"xet" + f["sha256"].encode()).hexdigest()
            e["path"] = p
            out[p] = e
        return out, dirs

    def _write_trees(self, r, rev):
        entries, dirs = self._entries(r)
        base = os.path.join(self.dir, "hub", "api", r.org, r.name, rev)
        r.tree_links = getattr(r, "tree_links", {})
        for dpath in [""] + sorted(dirs):
            prefix = dpath + "/" if dpath else ""
            children = [p for p in entries if p.startswith(prefix) and p != dpath]
            for kind in ("d", "r"):
                sel = children if kind == "r" else [p for p in children if "/" not in p[len(prefix):]]
                # folders first, then files, each by path (the Hub's order; it promises none)
                sel.sort(key=lambda p: (entries[p]["type"] != "directory", p))
                items = [entries[p] for p in sel]
                size = r.page_size or 1000
                pages = [items[i:i + size] for i in range(0, len(items), size)] or [[]]
                os.makedirs(os.path.join(base, dpath), exist_ok=True)
                for k, page in enumerate(pages):
                    cursor = "" if k == 0 else f"p{k + 1}"
                    with open(os.path.join(base, dpath, f"__tree_{kind}{cursor}.json"), "w") as fh:
                        json.dump(page, fh, separators=(",", ":"))
                    if k + 1 < len(pages):
                        q = "recursive=true" if kind == "r" else "recursive=false"
                        nxt = f"{self.hub_url}/api/models/{r.org}/{r.name}/tree/{rev}{'/' + dpath if dpath else ''}?{q}&expand=false&cursor=p{k + 2}"
                        r.tree_links[f"{r.org}/{r.name}/{rev}/{dpath}|{kind}|{cursor}"] = f'<{nxt}>; rel="next"'
        info = {"_id": hashlib.md5(r.repo_id.encode()).hexdigest()[:24], "id": r.repo_id, "modelId": r.repo_id,
                "author": r.org, "sha": r.commit, "lastModified": "2026-01-01T00:00:00.000Z", "private": r.access == "private",
                "gated": "manual" if r.access == "gated" else False, "disabled": False, "tags": [], "library_name": "transformers",
                "siblings": [{"rfilename": p} for p in sorted(r.files)], "createdAt": "2026-01-01T00:00:00.000Z"}
        with open(os.path.join(base, "__info.json"), "w") as fh:
            json.dump(info, fh, separators=(",", ":"))

    def _conf(self):
        d = self.dir
        q = lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'  # noqa: E731
        tok = self.hf_token
        lines = []
        w = lines.append
        if os.geteuid() == 0:
            import grp
            import pwd
            w(f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};")
        w("worker_processes 1;")
        w(f"error_log {q(d + '/nginx/error.log')} warn;")
        w(f"pid {q(d + '/nginx/nginx.pid')};")
        w(f"lock_file {q(d + '/nginx/nginx.lock')};")
        w("events { worker_connections 512; }")
        w("http {")
        for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
            w(f"  {t}_temp_path {q(d + '/tmp/' + t)};")
        w("  types { application/json json; text/plain txt; }")
        w("  default_type application/octet-stream;")
        w("  sendfile on; etag on; server_tokens off; keepalive_timeout 30s; merge_slashes on;")
        w("  map_hash_bucket_size 512; map_hash_max_size 65536;")
        w("  map $http_authorization $auth_present { default 1; \"\" 0; }")
        w(f"  map $http_authorization $hub_authed {{ default 0; {q('Bearer ' + tok)} 1; }}")
        w("  map $arg_recursive $tree_kind { default d; ~*^(true|1)$ r; }")
        w("  map $arg_cursor $tree_cursor { default __none; \"\" \"\"; ~^(p[0-9]+)$ $1; }")
        w("  map $tree_key $tree_next { default \"\";")
        for r in self.repos:
            for k, v in sorted(getattr(r, "tree_links", {}).items()):
                w(f"    {q(k)} {q(v)};")
        w("  }")
        w("  log_format jl escape=json '{\"t\":$msec,\"port\":$server_port,\"method\":\"$request_method\",\"uri\":\"$request_uri\","
          "\"status\":$status,\"bytes\":$body_bytes_sent,\"range\":\"$http_range\",\"if_range\":\"$http_if_range\","
          "\"auth\":\"$auth_present\",\"host\":\"$http_host\"}';")
        w(f"  access_log {q(d + '/nginx/access.log')} jl;")
        # (i) plain HTTP
        w("  server {")
        w(f"    listen 127.0.0.1:{self.http_port};")
        w(f"    root {q(d + '/www')};")
        w("    location / { }")
        w("  }")
        # (i') the same files over HTTPS
        w("  server {")
        w(f"    listen 127.0.0.1:{self.https_port} ssl;")
        w(f"    ssl_certificate {q(self.cert)}; ssl_certificate_key {q(self.key)};")
        w(f"    root {q(d + '/www')};")
        w("    location / { }")
        w("  }")
        # CDN
        w("  server {")
        w(f"    listen 127.0.0.1:{self.cdn_port} ssl;")
        w(f"    ssl_certificate {q(self.cert)}; ssl_certificate_key {q(self.key)};")
        w(f"    root {q(d + '/cdn')};")
        w("    location /repos/ {")
        w("      if ($http_authorization) { return 403 \"CDN: a request with an Authorization header (credentials must be dropped at a host change)\\n\"; }")
        w("      if ($arg_signature = \"\") { return 403 \"CDN: no Signature in the query (the redirect's query must be kept)\\n\"; }")
        w("      if ($arg_expires = \"\") { return 403 \"CDN: no Expires in the query\\n\"; }")
        w("    }")
        w("    location / { set $tree_key \"\"; return 404; }")
        w("  }")
        # the Hub
        w("  server {")
        w(f"    listen 127.0.0.1:{self.hub_port} ssl;")
        w(f"    ssl_certificate {q(self.cert)}; ssl_certificate_key {q(self.key)};")
        w("    default_type application/json;")

        def err(status, code, message, indent="      "):
            body = json.dumps({"error": message})
            return (f"{indent}add_header X-Error-Code {code} always; add_header X-Error-Message {q(message)} always;\n"
                    f"{indent}return {status} {q(body)};")

        def guard(r, indent="      ", resolve=False):
            if r.access == "private":
                return (f"{indent}if ($hub_authed = 0) {{\n"
                        + err(401, "RepoNotFound", f"Repository Not Found for url: {r.repo_id}. Please make sure you specified the correct `repo_id` and `repo_type`. If you are trying to access a private or gated repo, make sure you are authenticated.", indent + "  ")
                        + f"\n{indent}}}")
            if r.access == "gated" and resolve:
                return (f"{indent}if ($hub_authed = 0) {{\n"
                        + err(401, "GatedRepo", f"Access to model {r.repo_id} is restricted. You must have access to it and be authenticated to access it. Please log in.", indent + "  ")
                        + f"\n{indent}}}")
            return ""

        by_repo = {}
        for r in self.repos:
            by_repo.setdefault(r.repo_id, []).append(r)
        for repo_id, revs in by_repo.items():
            r0 = revs[0]
            api = f"/api/models/{repo_id}"
            apiroot = d + f"/hub/api/{repo_id}"
            # model info
            for path, rev in [(api, r0.revision)] + [(f"{api}/revision/{x}", x) for r in revs for x in (r.revision, r.commit)]:
                w(f"    location = {q(path)} {{")
                g = guard(r0)
                if g:
                    w(g)
                w(f"      alias {q(apiroot + '/' + rev + '/__info.json')};")
                w("    }")
            w(f"    location ^~ {q(api + '/revision/')} {{")
            w(guard(r0) or "")
            w(err(404, "RevisionNotFound", "Invalid rev id"))
            w("    }")
            for r in revs:
                for rev in (r.revision, r.commit):
                    tree = f"{api}/tree/{rev}"
                    for exact in (True, False):
                        if exact:
                            w(f"    location = {q(tree)} {{")
                            w("      set $t_path \"\";")
                        else:
                            w(f"    location ^~ {q(tree + '/')} {{")
                            w(f"      location ~ {q('^' + re.escape(tree) + '/(?<t_path>.*?)/*$')} {{")
                        ind = "      " if exact else "        "
                        g = guard(r, ind)
                        if g:
                            w(g)
                        w(f"{ind}set $tree_key \"{repo_id}/{rev}/$t_path|$tree_kind|$tree_cursor\";")
                        w(f"{ind}add_header Link $tree_next;")
                        w(f"{ind}add_header X-Repo-Commit {r.commit};")
                        w(f"{ind}root {q(apiroot + '/' + rev)};")
                        w(f"{ind}try_files \"/$t_path/__tree_$tree_kind$tree_cursor.json\" =404;")
                        w(f"{ind}error_page 404 = @entry404;")
                        if not exact:
                            w("      }")
                        w("    }")
            w(f"    location ^~ {q(api + '/tree/')} {{")
            w(guard(r0) or "")
            w(err(404, "RevisionNotFound", "Invalid rev id"))
            w("    }")
            w(f"    location ^~ {q(api + '/')} {{")
            w(guard(r0) or "")
            w(err(404, "EntryNotFound", "Not found"))
            w("    }")
            # resolve
            for r in revs:
                for rev in (r.revision, r.commit):
                    base = f"/{repo_id}/resolve/{rev}"
                    for p, f in r.files.items():
                        w(f"    location = {q(base + '/' + p)} {{")
                        g = guard(r, resolve=True)
                        if g:
                            w(g)
                        w(f"      add_header X-Repo-Commit {r.commit} always;")
                        if f["lfs"]:
                            sha = f["sha256"]
                            fname = p.rsplit("/", 1)[-1]
                            cd = urllib.parse.quote(f"inline; filename*=UTF-8''{fname}; filename=\"{fname}\";", safe="")
                            target = (f"{self.cdn_url}/repos/{sha[:2]}/{sha[2:4]}/{sha}?response-content-disposition={cd}"
                                      f"&Expires=4102444800&Policy=eyJTdGF0ZW1lbnQiOltdfQ__&Signature=c2lnbmF0dXJl~LWZha2U_&Key-Pair-Id=K3TESTKEYPAIR")
                            w(f"      add_header X-Linked-Size {f['size']} always;")
                            w(f"      add_header X-Linked-Etag {q(chr(34) + sha + chr(34))} always;")
                            w(f"      add_header ETag {q(chr(34) + sha + chr(34))} always;")
                            w(f"      return 302 {q(target)};")
                        else:
                            w("      default_type application/octet-stream;")
                            w(f"      alias {q(f['local'])};")
                        w("    }")
                    w(f"    location ^~ {q(base + '/')} {{")
                    g = guard(r, resolve=True)
                    if g:
                        w(g)
                    w(err(404, "EntryNotFound", "Entry not found"))
                    w("    }")
            w(f"    location ^~ {q('/' + repo_id + '/resolve/')} {{")
            w(guard(r0, resolve=True) or "")
            w(err(404, "RevisionNotFound", "Invalid rev id"))
            w("    }")
        w("    location @entry404 {")
        w(err(404, "EntryNotFound", "Entry not found"))
        w("    }")
        w("    location / {")
        w("      if ($http_authorization = \"\") {")
        w(err(401, "RepoNotFound", "Repository not found", "        "))
        w("      }")
        w(err(404, "RepoNotFound", "Repository not found"))
        w("    }")
        w("  }")
        w("}")
        return "\n".join(l for l in lines if l != "") + "\n"

    # lifecycle --------------------------------------------------------------------------------------
    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        certdir = os.path.join(self.dir, "tls")
        os.makedirs(certdir, exist_ok=True)
        self.cert, self.key = make_cert(certdir)
        last = ""
        for attempt in range(5):
            ports = [free_port() for _ in range(4)]
            if len(set(ports)) < 4:
                continue
            self.http_port, self.https_port, self.hub_port, self.cdn_port = ports
            for r in self.repos:
                r.tree_links = {}
            self._layout()
            conf = os.path.join(self.dir, "nginx", "nginx.conf")
            with open(conf, "w") as fh:
                fh.write(self._conf())
            err = os.path.join(self.dir, "nginx", "error.log")
            test = subprocess.run([NGINX, "-t", "-q", "-p", self.dir, "-c", conf, "-e", err], capture_output=True, text=True, timeout=30)
            if test.returncode != 0:
                raise RuntimeError(f"nginx -t failed on {conf}:\n{test.stderr}")
            self.proc = start_process([NGINX, "-p", self.dir, "-c", conf, "-e", err, "-g", "daemon off;"],
                                      os.path.join(self.dir, "nginx", "stdout.log"))
            if all(wait_port(p, 10, self.proc) for p in ports):
                return self
            stop_process(self.proc)
            self.proc = None
            last = open(err, errors="replace").read()[-2000:] if os.path.exists(err) else ""
            if "Address already in use" not in last:
                break
        raise RuntimeError(f"nginx did not start: {last}")

    def stop(self):
        stop_process(self.proc)
        self.proc = None
        if self._own_tmp:
            shutil.rmtree(self.dir, ignore_errors=True)

    def requests(self, server=None):
        """The access log so far: dicts with server ('http', 'hub', 'cdn'), method, uri, status, bytes,
        range, if_range, auth ('1' when an Authorization header came), host, t."""
        out = []
        path = os.path.join(self.dir, "nginx", "access.log")
        if os.path.exists(path):
            for line in open(path, errors="replace"):
                with contextlib.suppress(ValueError):
                    e = json.loads(line)
                    e["server"] = self.port_name(e["port"])
                    if server is None or e["server"] == server:
                        out.append(e)
        return out

    def clear_log(self):
        path = os.path.join(self.dir, "nginx", "access.log")
        if os.path.exists(path):
            open(path, "w").close()  # nginx appends (O_APPEND): truncating in place is safe


# ---------------------------------------------------------------------------------------------------
# S3: moto's server behind a SigV4-checking gateway

def _uri_encode(s, keep_slash):
    """SigV4's UriEncode: every byte but A-Z a-z 0-9 - _ . ~ (and '/' when keep_slash) as %XY."""
    return urllib.parse.quote(s, safe="-_.~" + ("/" if keep_slash else ""))


def _hmac(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def sigv4_signing_key(secret, date, region, service):
    k = _hmac(("AWS4" + secret).encode(), date)
    k = _hmac(k, region)
    k = _hmac(k, service)
    return _hmac(k, "aws4_request")


def sigv4_canonical_request(method, raw_path, raw_query, headers, signed_headers, payload_hash, drop_query=()):
    """S3's canonical request: the path decoded then UriEncoded once (S3 neither normalizes nor
    double-encodes), the query pairs decoded, re-encoded and sorted, the signed headers' values trimmed with
    runs of spaces collapsed and several values joined by ','."""
    uri = _uri_encode(urllib.parse.unquote(raw_path), True) or "/"
    pairs = []
    for part in raw_query.split("&") if raw_query else []:
        if part == "":
            continue
        k, _, v = part.partition("=")
        k, v = urllib.parse.unquote(k), urllib.parse.unquote(v)
        if k in drop_query:
            continue
        pairs.append((_uri_encode(k, False), _uri_encode(v, False)))
    query = "&".join(f"{k}={v}" for k, v in sorted(pairs))
    canon_headers = ""
    for name in signed_headers:
        values = headers.get(name, [])
        canon_headers += name + ":" + ",".join(re.sub(r"\s+", " ", v.strip()) for v in values) + "\n"
    return "\n".join([method, uri, query, canon_headers, ";".join(signed_headers), payload_hash])


def sigv4_string_to_sign(amz_date, scope, canonical_request):
    return "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical_request.encode()).hexdigest()])


def sigv4_signature(secret, amz_date, region, service, canonical_request):
    scope = f"{amz_date[:8]}/{region}/{service}/aws4_request"
    sts = sigv4_string_to_sign(amz_date, scope, canonical_request)
    return hmac.new(sigv4_signing_key(secret, amz_date[:8], region, service), sts.encode(), hashlib.sha256).hexdigest(), sts


class S3Error(Exception):
    def __init__(self, status, code, message, **extra):
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.extra = status, code, message, extra

    def xml(self, resource):
        more = "".join(f"<{k}>{xml_escape(str(v))}</{k}>" for k, v in self.extra.items())
        rid = hashlib.md5(os.urandom(8)).hexdigest()[:16].upper()
        return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{self.code}</Code><Message>{xml_escape(self.message)}</Message>'
                f"{more}<Resource>{xml_escape(resource)}</Resource><RequestId>{rid}</RequestId></Error>").encode()


# what the gateway sends moto in place of the client's Authorization (moto admits any SigV4 header; without one it
# refuses a GET of an object from 127.0.0.1)
UPSTREAM_AUTH = "AWS4-HMAC-SHA256 Credential=gateway/20000101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0"

HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"}


class _GatewayHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "AmazonS3"
    sys_version = ""

    def log_message(self, *args):
        pass

    def _headers_multi(self):
        out = {}
        for k, v in self.headers.items():
            out.setdefault(k.lower(), []).append(v)
        return out

    def _send_error(self, err, entry):
        body = err.xml(self.path.split("?")[0])
        entry["status"], entry["error"] = err.status, err.code
        self.send_response(err.status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        if err.code == "AuthorizationHeaderMalformed":
            self.send_header("x-amz-bucket-region", self.server.owner.region)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _verify(self, body):
        gw = self.server.owner
        hdrs = self._headers_multi()
        raw_path, _, raw_query = self.path.partition("?")
        query = urllib.parse.parse_qs(raw_query, keep_blank_values=True)
        auth = self.headers.get("Authorization")
        presigned = "X-Amz-Algorithm" in query
        if not auth and not presigned:
            if gw.allow_anonymous:
                return None
            raise S3Error(403, "AccessDenied", "Access Denied")
        if auth and presigned:
            raise S3Error(400, "InvalidArgument", "Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified")
        if presigned:
            g = lambda k: query.get(k, [""])[0]  # noqa: E731
            if g("X-Amz-Algorithm") != "AWS4-HMAC-SHA256":
                raise S3Error(400, "AuthorizationQueryParametersError", "X-Amz-Algorithm only supports \"AWS4-HMAC-SHA256\"")
            credential, signed, provided, amz_date = g("X-Amz-Credential"), g("X-Amz-SignedHeaders"), g("X-Amz-Signature"), g("X-Amz-Date")
            try:
                expires = int(g("X-Amz-Expires"))
                t0 = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
            except ValueError:
                raise S3Error(400, "AuthorizationQueryParametersError", "X-Amz-Date / X-Amz-Expires missing or malformed")
            if time.time() > t0 + expires:
                raise S3Error(403, "AccessDenied", "Request has expired", X_Amz_Expires=expires)
            payload = "UNSIGNED-PAYLOAD"
        else:
            m = re.fullmatch(r"AWS4-HMAC-SHA256\s+(.*)", auth.strip())
            if not m:
                if auth.startswith("AWS "):
                    raise S3Error(400, "InvalidRequest", "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256.")
                raise S3Error(400, "InvalidArgument", "Unsupported Authorization Type", ArgumentName="Authorization")
            comps = {}
            for c in m.group(1).split(","):
                k, _, v = c.strip().partition("=")
                comps[k] = v
            if set(comps) != {"Credential", "SignedHeaders", "Signature"}:
                raise S3Error(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; the authorization header requires three components: Credential, SignedHeaders, and Signature.")
            credential, signed, provided = comps["Credential"], comps["SignedHeaders"], comps["Signature"]
            amz_date = self.headers.get("x-amz-date", "")
            if not re.fullmatch(r"\d{8}T\d{6}Z", amz_date):
                raise S3Error(403, "AccessDenied", "AWS authentication requires a valid Date or x-amz-date header")
            t0 = calendar.timegm(time.strptime(amz_date, "%Y%m%dT%H%M%SZ"))
            if abs(time.time() - t0) > 900:
                raise S3Error(403, "RequestTimeTooSkewed", "The difference between the request time and the current time is too large.",
                              RequestTime=amz_date, MaxAllowedSkewMilliseconds=900000)
            payload = self.headers.get("x-amz-content-sha256")
            if payload is None:
                raise S3Error(400, "InvalidRequest", "Missing required header for this request: x-amz-content-sha256")
            if not re.fullmatch(r"UNSIGNED-PAYLOAD|STREAMING-[A-Z0-9-]+|[0-9a-f]{64}", payload):
                raise S3Error(400, "InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, or a valid sha256 value.")
            if re.fullmatch(r"[0-9a-f]{64}", payload) and payload != hashlib.sha256(body).hexdigest():
                raise S3Error(400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match what was computed.",
                              ClientComputedContentSHA256=payload, S3ComputedContentSHA256=hashlib.sha256(body).hexdigest())
        parts = credential.split("/")
        if len(parts) != 5 or parts[4] != "aws4_request":
            raise S3Error(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; the Credential is mal-formed; expecting \"<YOUR-AKID>/YYYYMMDD/REGION/SERVICE/aws4_request\".")
        akid, date, region, service = parts[:4]
        if akid not in gw.credentials:
            raise S3Error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.", AWSAccessKeyId=akid)
        if region != gw.region:
            raise S3Error(400, "AuthorizationHeaderMalformed", f"The authorization header is malformed; the region '{region}' is wrong; expecting '{gw.region}'", Region=gw.region)
        if service != "s3" or date != amz_date[:8]:
            raise S3Error(400, "AuthorizationHeaderMalformed", f"The authorization header is malformed; incorrect service \"{service}\" or date \"{date}\" (x-amz-date {amz_date}).")
        signed_list = signed.split(";")
        if "host" not in signed_list:
            raise S3Error(400, "AuthorizationHeaderMalformed", "The authorization header is malformed; 'host' must be a signed header.")
        secret, token = gw.credentials[akid]
        canonical = sigv4_canonical_request(self.command, raw_path, raw_query, hdrs, signed_list, payload,
                                            drop_query=("X-Amz-Signature",) if presigned else ())
        want, sts = sigv4_signature(secret, amz_date, region, service, canonical)
        if not hmac.compare_digest(want, provided):
            raise S3Error(403, "SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided. Check your key and signing method.",
                          AWSAccessKeyId=akid, StringToSign=sts, CanonicalRequest=canonical)
        sent_token = (query.get("X-Amz-Security-Token", [None])[0] if presigned else self.headers.get("x-amz-security-token"))
        if token is not None and sent_token != token:
            raise S3Error(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
        if token is None and sent_token is not None:
            raise S3Error(403, "InvalidToken", "The provided token is malformed or otherwise invalid.")
        return akid

    def _upstream(self, method, path, headers, body=None):
        c = http.client.HTTPConnection("127.0.0.1", self.server.owner.upstream_port, timeout=60)
        c.request(method, path, body=body, headers={**headers, "Authorization": UPSTREAM_AUTH})
        return c, c.getresponse()

    def _handle(self):
        gw = self.server.owner
        rng = self.headers.get("Range")
        entry = gw.record({"t": time.time(), "method": self.command, "path": self.path.split("?")[0],
                           "query": self.path.partition("?")[2], "range": rng, "if_match": self.headers.get("If-Match"),
                           "if_range": self.headers.get("If-Range"), "auth": "Authorization" in self.headers,
                           "status": None, "bytes": 0})
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            return self._send_error(S3Error(411, "MissingContentLength", "You must provide the Content-Length HTTP header."), entry)
        body = self.rfile.read(n) if n else b""
        try:
            entry["akid"] = self._verify(body)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() not in ("authorization", "host", "expect")}
            c, r = self._upstream(self.command, self.path, headers, body if body else None)
            try:
                im = self.headers.get("If-Match")
                if im and r.status in (200, 206) and im.strip() not in ("*", r.getheader("ETag", "")):
                    r.read()
                    raise S3Error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold", Condition="If-Match")
                entry["status"] = r.status
                self.send_response(r.status)
                length = None
                for k, v in r.getheaders():
                    if k.lower() in HOP_BY_HOP or k.lower() in ("date", "server"):
                        continue
                    if k.lower() == "content-length":
                        length = int(v)
                    self.send_header(k, v)
                if length is None and self.command != "HEAD" and r.status not in (204, 304):
                    data = r.read()
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    entry["bytes"] = len(data)
                    return
                self.end_headers()
                if self.command != "HEAD":
                    while True:
                        chunk = r.read(1 << 16)
                        if not chunk:
                            break
                        self.wfile.write(chunk)
                        entry["bytes"] += len(chunk)
            finally:
                c.close()
        except S3Error as e:
            self._send_error(e, entry)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle


class S3Server(_Managed):
    """moto's server (in memory, its log in a fresh directory) behind S3Gateway. `endpoint` is the gateway
    (AWS_ENDPOINT_URL)."""

    def __init__(self, tmp=None, access_key="CKPTTEST", secret_key="CKPTTEST", region="us-east-1", allow_anonymous=False):
        if not os.access(MOTO_SERVER, os.X_OK):
            raise Unavailable(f"{MOTO_SERVER} not found: run scripts/deps.sh")
        if not shutil.which("curl"):
            raise Unavailable("curl not found")
        self._own_tmp = tmp is None
        self.dir = tmp or tempfile.mkdtemp(prefix="ckpt-s3-")
        self.access_key, self.secret_key, self.region = access_key, secret_key, region
        self.proc = None
        self.gateway = S3Gateway(self, {access_key: (secret_key, None)}, region, allow_anonymous)
        self.upstream_port = None

    @property
    def endpoint(self):
        return self.gateway.url

    @property
    def upstream_url(self):
        return f"http://127.0.0.1:{self.upstream_port}"

    @property
    def requests(self):
        return self.gateway.requests

    def add_credentials(self, access_key, secret_key, session_token=None):
        self.gateway.credentials[access_key] = (secret_key, session_token)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        log = os.path.join(self.dir, "moto.log")
        # a free port, then moto on it (Werkzeug prints the port it got only after binding; a port taken in
        # between is a clear start failure below, not a wrong server)
        with socket.socket() as sk:
            sk.bind(("127.0.0.1", 0))
            port = sk.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        self.proc = start_process([MOTO_SERVER, "-H", "127.0.0.1", "-p", str(port)], log, env=env)
        if not wait_port(port, 30, self.proc):
            raise RuntimeError(f"moto_server did not start: {open(log, errors='replace').read()[-2000:]}")
        self.upstream_port = port
        self.gateway.start()
        return self

    def stop(self):
        self.gateway.stop()
        stop_process(self.proc)
        self.proc = None
        if self._own_tmp:
            shutil.rmtree(self.dir, ignore_errors=True)

    def curl(self, *args, secret=None, access_key=None, timeout=60):
        """The curl CLI signing with SigV4 through the gateway; returns CompletedProcess (text)."""
        user = f"{access_key or self.access_key}:{secret or self.secret_key}"
        cmd = ["curl", "-sS", "--aws-sigv4", f"aws:amz:{self.region}:s3", "--user", user,
               "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *args]
        return subprocess.run(cmd, capture_output=True, encoding="latin-1", timeout=timeout)

    def create_bucket(self, bucket):
        _check(bucket, SAFE_NAME, "bucket")
        p = self.curl("-X", "PUT", "-o", "/dev/null", "-w", "%{http_code}", f"{self.endpoint}/{bucket}")
        if p.stdout.strip() != "200":
            raise RuntimeError(f"create bucket {bucket}: {p.stdout} {p.stderr}")

    def put(self, bucket, key, local):
        """Uploads a file (through the gateway, signed by curl)."""
        _check(key, SAFE_PATH, "key")
        p = self.curl("-T", local, "-o", "/dev/null", "-w", "%{http_code}", f"{self.endpoint}/{bucket}/{key}", timeout=300)
        if p.stdout.strip() != "200":
            raise RuntimeError(f"put s3://{bucket}/{key}: {p.stdout} {p.stderr}")
        return f"s3://{bucket}/{key}"


class S3Gateway(_ThreadedServer):
    handler = _GatewayHandler

    def __init__(self, s3, credentials, region, allow_anonymous=False):
        super().__init__()
        self.s3 = s3
        self.credentials = dict(credentials)  # access key -> (secret, session token or None)
        self.region = region
        self.allow_anonymous = allow_anonymous

    @property
    def upstream_port(self):
        return self.s3.upstream_port


# ---------------------------------------------------------------------------------------------------
# the misbehaving HTTP server

KINDS = ("ok", "missing", "auth", "forbidden", "flaky", "busy", "norange", "etag", "stall", "reset", "short", "shortonce",
         "ctletag", "endless404", "redirect", "endless302", "loop", "scheme", "drip206", "drip404", "slowloris", "lmchange",
         "novalidator")
CREDENTIAL_HEADERS = ("Authorization", "X-Amz-Security-Token", "X-Amz-Content-Sha256", "X-Amz-Date", "Cookie")


class _BadHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "misbehaving/1"
    sys_version = ""

    def log_message(self, *args):
        pass

    def _simple(self, status, text, extra=()):
        body = (text + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _drop(self, rst):
        """Closes the connection without (more of) a response; with rst a TCP RST."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
        if rst:
            with contextlib.suppress(OSError):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        else:
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.connection.close()
        self.wfile = io.BytesIO()  # what the base class still flushes goes nowhere

    def _drip(self, entry, chunk, every, body=None):
        """Writes `chunk` every `every` seconds until the client hangs up (or 60 s, or the server stops); with
        `body`, that body, len(chunk) bytes at a time, then the connection is closed."""
        srv, t0, pos = self.server.owner, time.time(), 0
        with contextlib.suppress(OSError):
            while time.time() - t0 < 60 and not srv.stopping.is_set():
                if body is not None:
                    if pos >= len(body):
                        break
                    chunk, pos = body[pos:pos + len(chunk)], pos + len(chunk)
                self.wfile.write(chunk)
                self.wfile.flush()
                entry["bytes"] += len(chunk)
                srv.stopping.wait(every)
        entry["secs"] = time.time() - t0
        return self._drop(rst=False)

    def _redirect(self, entry, status, location, body_forever=False):
        entry["status"] = status
        self.send_response(status)
        self.send_header("Location", location)
        if body_forever:  # a redirect whose body never ends: a client must not read it to the end
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            return self._drip(entry, b"moved " * 10923, 0)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _serve(self, data, etag, entry, cut=None, stall=False, ignore_range=False, last_modified=True, drip=None):
        """A file with Range (single ranges; several are answered with the whole body) and If-Range."""
        srv = self.server.owner
        size = len(data)
        rng = None if ignore_range else parse_range(self.headers.get("Range"), size)
        if_range = self.headers.get("If-Range")
        if rng is not None and if_range is not None and if_range.strip() != etag:
            rng = None  # RFC 9110 13.1.5: the representation changed, send all of it
        if rng == "unsatisfiable":
            entry["status"] = 416
            return self._simple(416, "range not satisfiable", [("Content-Range", f"bytes */{size}"), ("ETag", etag)])
        status, first, last = (206, rng[0], rng[1]) if rng else (200, 0, size - 1)
        body = data[first:last + 1]
        entry["status"] = status
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "none" if ignore_range else "bytes")
        if etag:
            self.send_header("ETag", etag)
        if last_modified:
            self.send_header("Last-Modified", last_modified if isinstance(last_modified, str) else srv.last_modified)
        if status == 206:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        if cut is not None:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command == "HEAD":
            return
        if stall:
            self.wfile.flush()
            entry["stalled"] = True
            srv.stopping.wait(srv.stall_seconds)
            return self._drop(rst=False)
        if drip is not None:  # (chunk bytes, every seconds): a body that trickles
            return self._drip(entry, b"x" * drip[0], drip[1], body=body)
        if cut is not None:
            self.wfile.write(body[:cut(len(body))])
            entry["bytes"] = cut(len(body))
            return self._drop(rst=False)
        self.wfile.write(body)
        entry["bytes"] = len(body)

    def _handle(self):
        srv = self.server.owner
        path = urllib.parse.unquote(self.path.split("?")[0])
        parts = path.strip("/").split("/", 1)
        kind, name = (parts + [""])[:2]
        entry = srv.record({"t": time.time(), "kind": kind, "name": name, "method": self.command, "path": path,
                            "range": self.headers.get("Range"), "if_range": self.headers.get("If-Range"),
                            "auth": "Authorization" in self.headers, "status": None, "bytes": 0,
                            "creds": [h for h in CREDENTIAL_HEADERS if h in self.headers]})
        if self.command not in ("GET", "HEAD"):
            entry["status"] = 405
            return self._simple(405, "method not allowed", [("Allow", "GET, HEAD")])
        query = self.path.split("?", 1)[1] if "?" in self.path else None
        if kind == "api":  # HF_ENDPOINT here: a repo's tree listing whose Link pages never end, 2000 files a page
            page = int(urllib.parse.parse_qs(query or "").get("cursor", ["0"])[0])
            body = json.dumps([{"type": "file", "path": f"d{page}/f{i}.bin", "size": 1} for i in range(2000)]).encode()
            entry["status"], entry["bytes"] = 200, len(body)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Link", f'<{srv.url}{path}?recursive=true&cursor={page + 1}>; rel="next"')
            self.end_headers()
            return self.wfile.write(body)
        if kind == "redirect":  # 307 to the same path on another server (another port: another host for a client)
            target = f"{srv.redirect_to}/ok/{name}" + (f"?{query}" if query else "")
            return self._redirect(entry, 307, target) if srv.redirect_to else self._simple(404, "no redirect target")
        if kind not in KINDS or name not in srv.files:
            entry["status"] = 404
            return self._simple(404, "not found")
        data, etag = srv.data(name)
        first_time = srv.first(kind, name)
        if kind == "ok":
            return self._serve(data, etag, entry)
        if kind == "missing":
            entry["status"] = 404
            return self._simple(404, "not found")
        if kind == "auth":
            entry["status"] = 401
            return self._simple(401, "authentication required", [("WWW-Authenticate", 'Bearer realm="ckpt-test"')])
        if kind == "forbidden":
            entry["status"] = 403
            return self._simple(403, "forbidden")
        if kind == "flaky":
            if srv.first((kind, self.command, self.headers.get("Range")), name):
                entry["status"] = 500
                return self._simple(500, "internal error (flaky: the retry works)")
            return self._serve(data, etag, entry)
        if kind == "busy":
            if first_time:
                entry["status"] = 429
                return self._simple(429, "too many requests", [("Retry-After", "1")])
            return self._serve(data, etag, entry)
        if kind == "norange":
            return self._serve(data, etag, entry, ignore_range=True)
        if kind == "etag":
            etag = etag if first_time else etag[:-1] + '-changed"'
            return self._serve(data, etag, entry)
        if kind == "stall":
            return self._serve(data, etag, entry, stall=True)
        if kind == "endless404":  # a 404 whose body never ends (until the client hangs up, or 1 GiB / 20 s)
            entry["status"] = 404
            self.send_response(404)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk, t0 = b"not found " * 6554, time.time()
            with contextlib.suppress(OSError):
                while entry["bytes"] < (1 << 30) and time.time() - t0 < 20 and not srv.stopping.is_set():
                    self.wfile.write(chunk)
                    entry["bytes"] += len(chunk)
            return self._drop(rst=False)
        if kind == "endless302":
            return self._redirect(entry, 302, f"/ok/{name}", body_forever=True)
        if kind == "loop":
            return self._redirect(entry, 302, f"/loop/{name}")
        if kind == "scheme":
            return self._redirect(entry, 302, "file:///etc/passwd")
        if kind == "drip206":  # the headers of a 206, then 2 bytes a second
            return self._serve(data, etag, entry, drip=(2, 1.0))
        if kind == "drip404":
            entry["status"] = 404
            self.send_response(404)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            return self._drip(entry, b"no", 1.0)
        if kind == "slowloris":  # 2 KiB a second: above the low-speed limit, below any deadline
            return self._serve(data, etag, entry, drip=(512, 0.25))
        if kind == "lmchange":  # no ETag; after the first request new bytes (same size) and a new Last-Modified
            if not first_time:
                data = bytes(b ^ 0xFF for b in data[:64]) + data[64:]
            lm = srv.last_modified if first_time else email.utils.formatdate(time.time(), usegmt=True)
            return self._serve(data, None, entry, last_modified=lm)
        if kind == "novalidator":  # neither ETag nor Last-Modified
            return self._serve(data, None, entry, last_modified=False)
        if kind == "ctletag":  # an ETag holding a bare CR: a client that echoes it in If-Range injects a header
            return self._serve(data, etag[:-1] + '\rX-Injected: 1"', entry)
        if kind == "reset":
            if first_time:
                entry["status"] = "reset"
                return self._drop(rst=True)
            return self._serve(data, etag, entry)
        if kind == "short" or (kind == "shortonce" and first_time):
            return self._serve(data, etag, entry, cut=lambda n: n // 2 if n > 1 else 0)
        return self._serve(data, etag, entry)

    do_GET = do_HEAD = do_POST = do_PUT = _handle


class MisbehavingServer(_ThreadedServer):
    """files: {name: local path}; each is served at url/KIND/NAME for every KIND in KINDS."""
    handler = _BadHandler

    def __init__(self, files, stall_seconds=120):
        super().__init__()
        self.files = {}
        for name, local in files.items():
            _check(name, SAFE_PATH, "name")
            self.files[name] = os.path.abspath(local)
        self.stall_seconds = stall_seconds
        self.redirect_to = None  # the "redirect" kind's target server (its url)
        self._cache = {}
        self._seen = set()
        self.last_modified = email.utils.formatdate(time.time() - 3600, usegmt=True)

    def data(self, name):
        with self.lock:
            if name not in self._cache:
                data = open(self.files[name], "rb").read()
                self._cache[name] = (data, '"' + hashlib.sha1(data).hexdigest()[:20] + '"')
            return self._cache[name]

    def first(self, key, name):
        """True the first time (key, name) is seen."""
        with self.lock:
            if (key, name) in self._seen:
                return False
            self._seen.add((key, name))
            return True

    def reset_state(self):
        with self.lock:
            self._seen.clear()
            self.requests.clear()

    def url_for(self, kind, name):
        return f"{self.url}/{kind}/{name}"

    def count(self, kind=None, name=None):
        with self.lock:
            return sum(1 for r in self.requests if (kind is None or r["kind"] == kind) and (name is None or r["name"] == name))


# ---------------------------------------------------------------------------------------------------
# selftest: every behaviour checked with the curl CLI

def _curl(*args, timeout=30, env=None):
    return subprocess.run(["curl", "-sS", *args], capture_output=True, timeout=timeout, env=env)


def _head(out):
    """Status and headers (lower-case names) of the last response in curl -i / -D - output."""
    text = out.decode("latin-1")
    blocks = [b for b in re.split(r"\r?\n\r?\n", text) if re.match(r"HTTP/", b)]
    hdr = blocks[-1] if blocks else ""
    lines = hdr.splitlines()
    status = int(lines[0].split()[1]) if lines else 0
    h = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        h.setdefault(k.strip().lower(), v.strip())
    return status, h


def selftest(root):
    fails = []

    def expect(what, cond):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            fails.append(what)

    td = os.path.join(root, "testdata")
    sd = os.path.join(td, "t211", "sd_compiled_211.pt")
    st = os.path.join(td, "t211", "hf_bert_bf16", "model.safetensors")
    gpt2 = os.path.join(td, "hf211", "gpt2_tiny")
    data = open(sd, "rb").read()

    # SigV4 against AWS's documented example (S3 API reference, "Example: GET Object" with a Range)
    canon = sigv4_canonical_request("GET", "/test.txt", "", {"host": ["examplebucket.s3.amazonaws.com"], "range": ["bytes=0-9"],
                                    "x-amz-content-sha256": [EMPTY_SHA256], "x-amz-date": ["20130524T000000Z"]},
                                    ["host", "range", "x-amz-content-sha256", "x-amz-date"], EMPTY_SHA256)
    sig, _ = sigv4_signature("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524T000000Z", "us-east-1", "s3", canon)
    expect("sigv4: AWS's GET Object example signature", sig == "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
    canon = sigv4_canonical_request("GET", "/", "max-keys=2&prefix=J", {"host": ["examplebucket.s3.amazonaws.com"],
                                    "x-amz-content-sha256": [EMPTY_SHA256], "x-amz-date": ["20130524T000000Z"]},
                                    ["host", "x-amz-content-sha256", "x-amz-date"], EMPTY_SHA256)
    sig, _ = sigv4_signature("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524T000000Z", "us-east-1", "s3", canon)
    expect("sigv4: AWS's GET Bucket (list objects) example signature", sig == "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7")

    # nginx ------------------------------------------------------------------------------------------
    with NginxServers() as ng:
        pass  # start and stop with nothing configured
    ng = NginxServers()
    ng.add_file("sd.pt", sd)
    ng.add_file("dir/model.safetensors", st)
    files = {p: os.path.join(gpt2, p) for p in os.listdir(gpt2)}
    ng.add_hf_repo("org", "gpt2", "main", files)
    ng.add_hf_repo("org", "gpt2", "v1", {"model.safetensors": st, "config.json": os.path.join(td, "t211", "hf_bert_bf16", "config.json")})
    nested = {"config.json": os.path.join(gpt2, "config.json"), "weights/a.safetensors": st, "weights/deep/b.pt": sd,
              "weights/c.safetensors": st, "top.pt": sd}
    ng.add_hf_repo("org", "paged", "main", nested, page_size=2)
    ng.add_hf_repo("org", "gated", "main", {"model.safetensors": st, "config.json": os.path.join(gpt2, "config.json")}, access="gated")
    ng.add_hf_repo("org", "private", "main", {"model.safetensors": st}, access="private")
    with ng:
        ca = ["--cacert", ng.cert]
        # plain HTTP
        p = _curl("-i", "-r", "0-9", f"{ng.http_url}/sd.pt")
        s, h = _head(p.stdout)
        expect(f"http: Range 0-9 is a 206 with Content-Range and ETag ({s}, {h.get('content-range')}, {h.get('etag')})",
               s == 206 and h.get("content-range") == f"bytes 0-9/{len(data)}" and h.get("etag", "").startswith('"') and p.stdout.endswith(data[:10]))
        etag = h.get("etag")
        p = _curl("-i", "-r", "-22", f"{ng.http_url}/sd.pt")
        s, h = _head(p.stdout)
        expect("http: suffix range -22 is the last 22 bytes", s == 206 and p.stdout.endswith(data[-22:]))
        p = _curl("-i", "-r", "0-9", "-H", f"If-Range: {etag}", f"{ng.http_url}/sd.pt")
        expect("http: If-Range with the ETag: 206", _head(p.stdout)[0] == 206)
        p = _curl("-i", "-r", "0-9", "-H", 'If-Range: "other"', f"{ng.http_url}/sd.pt")
        s, h = _head(p.stdout)
        expect(f"http: If-Range with another ETag: 200 whole ({s})", s == 200 and p.stdout.endswith(data))
        p = _curl("-i", "-r", f"{len(data) + 10}-", f"{ng.http_url}/sd.pt")
        expect("http: a range past the end: 416", _head(p.stdout)[0] == 416)
        p = _curl("-i", "-r", "0-3", f"{ng.http_url}/dir/model.safetensors")
        expect("http: nested name", _head(p.stdout)[0] == 206 and p.stdout.endswith(open(st, "rb").read(4)))
        p = _curl("-i", f"{ng.http_url}/nope.pt")
        expect("http: unknown file 404", _head(p.stdout)[0] == 404)
        log = ng.requests("http")
        expect(f"http: access log has the requests with Range ({len(log)})", len(log) >= 6 and log[0]["range"] == "bytes=0-9" and log[0]["status"] == 206)
        p = _curl("-i", "--cacert", ng.cert, "-r", "0-9", f"{ng.https_url}/sd.pt")
        expect("https: the same files over TLS", _head(p.stdout)[0] == 206 and p.stdout.endswith(data[:10]))

        # TLS
        p = _curl("-o", "/dev/null", "-w", "%{http_code}", f"{ng.hub_url}/api/models/org/gpt2/tree/main")
        expect(f"hub: without the CA, curl refuses the certificate (rc {p.returncode})", p.returncode == 60)
        env = dict(os.environ, CURL_CA_BUNDLE=ng.cert)
        p = _curl("-o", "/dev/null", "-w", "%{http_code}", f"{ng.hub_url}/api/models/org/gpt2/tree/main", env=env)
        expect(f"hub: with CURL_CA_BUNDLE the certificate verifies ({p.stdout})", p.stdout == b"200")

        # Hub tree
        p = _curl(*ca, "-i", f"{ng.hub_url}/api/models/org/gpt2/tree/main?recursive=true&expand=false")
        s, h = _head(p.stdout)
        tree = json.loads(p.stdout.split(b"\r\n\r\n", 1)[1])
        want = {f: os.path.getsize(os.path.join(gpt2, f)) for f in os.listdir(gpt2)}
        expect(f"hub: tree lists every file with its size ({s}, {h.get('content-type')})",
               s == 200 and h.get("content-type", "").startswith("application/json") and {e["path"]: e["size"] for e in tree} == want)
        lfs = [e for e in tree if "lfs" in e]
        expect("hub: safetensors entries have lfs {oid sha256, size, pointerSize}, json ones do not",
               len(lfs) == 3 and all(e["path"].endswith(".safetensors") and len(e["lfs"]["oid"]) == 64 and e["lfs"]["size"] == e["size"]
                                     and e["lfs"]["pointerSize"] == 125 + len(str(e["size"])) for e in lfs)
               and all(len(e["oid"]) == 40 and e["type"] == "file" for e in tree))
        cfg = next(e for e in tree if e["path"] == "config.json")
        expect("hub: a git file's oid is its blob sha1", cfg["oid"] == file_digests(os.path.join(gpt2, "config.json"))[1])
        for q in ("", "?recursive=True", "?recursive=1", "?recursive=false&expand=False"):
            p = _curl(*ca, "-sS", "-o", "/dev/null", "-w", "%{http_code}", f"{ng.hub_url}/api/models/org/gpt2/tree/main/{q}")
            expect(f"hub: tree/main/{q}: 200", p.stdout == b"200")

        def pages(url):
            out, n = [], 0
            while url and n < 20:
                p = _curl(*ca, "-i", url)
                s, h = _head(p.stdout)
                out.append((s, json.loads(p.stdout.split(b"\r\n\r\n", 1)[1]) if s == 200 else None))
                m = re.match(r'<([^>]+)>;\s*rel="next"', h.get("link", ""))
                url = m.group(1) if m else None
                n += 1
            return out

        got = pages(f"{ng.hub_url}/api/models/org/paged/tree/main?recursive=true")
        paths = [e["path"] for _, page in got for e in page]
        expect(f"hub: paginated recursive tree: {len(got)} pages of <= 2 following Link rel=next, every entry once ({paths})",
               len(got) == 4 and all(s == 200 and len(pg) <= 2 for s, pg in got)
               and sorted(paths) == sorted(list(nested) + ["weights", "weights/deep"]))
        got = pages(f"{ng.hub_url}/api/models/org/paged/tree/main")
        paths = [e["path"] for _, page in got for e in page]
        expect(f"hub: paginated non-recursive root: direct children only ({paths})", sorted(paths) == ["config.json", "top.pt", "weights"])
        expect("hub: folders come first, as {type: directory, oid, size: 0, path}",
               got[0][1][0] == {"type": "directory", "oid": got[0][1][0]["oid"], "size": 0, "path": "weights"})
        got = pages(f"{ng.hub_url}/api/models/org/paged/tree/main/weights%2Fdeep?recursive=True&expand=False")
        expect("hub: %2F-encoded subpath (huggingface_hub's quote(path, safe=''))", [e["path"] for _, pg in got for e in pg] == ["weights/deep/b.pt"])
        got = pages(f"{ng.hub_url}/api/models/org/paged/tree/main/weights/")
        expect("hub: subpath with a trailing slash, non-recursive",
               sorted(e["path"] for _, pg in got for e in pg) == ["weights/a.safetensors", "weights/c.safetensors", "weights/deep"])
        commit = ng.commit_of("org", "gpt2", "v1")
        for rev in ("v1", commit):
            p = _curl(*ca, f"{ng.hub_url}/api/models/org/gpt2/tree/{rev}")
            expect(f"hub: tree at revision {rev}", sorted(e["path"] for e in json.loads(p.stdout)) == ["config.json", "model.safetensors"])
        p = _curl(*ca, "-i", f"{ng.hub_url}/api/models/org/gpt2/tree/nope")
        s, h = _head(p.stdout)
        expect(f"hub: unknown revision: 404 RevisionNotFound ({s} {h.get('x-error-code')})", s == 404 and h.get("x-error-code") == "RevisionNotFound")
        p = _curl(*ca, "-i", f"{ng.hub_url}/api/models/org/gpt2/tree/main/nodir")
        s, h = _head(p.stdout)
        expect(f"hub: unknown folder: 404 EntryNotFound ({s} {h.get('x-error-code')})", s == 404 and h.get("x-error-code") == "EntryNotFound")
        p = _curl(*ca, "-i", f"{ng.hub_url}/api/models/org/nope/tree/main")
        s, h = _head(p.stdout)
        expect(f"hub: unknown repo without a token: 401 RepoNotFound ({s} {h.get('x-error-code')})", s == 401 and h.get("x-error-code") == "RepoNotFound")
        p = _curl(*ca, "-i", "-H", "Authorization: Bearer x", f"{ng.hub_url}/api/models/org/nope/tree/main")
        expect("hub: unknown repo with a token: 404", _head(p.stdout)[0] == 404)
        p = _curl(*ca, f"{ng.hub_url}/api/models/org/gpt2/revision/v1")
        info = json.loads(p.stdout)
        expect("hub: model info has sha and siblings", info["sha"] == commit and [s["rfilename"] for s in info["siblings"]] == ["config.json", "model.safetensors"])

        # Hub resolve
        stdata = open(st, "rb").read()
        p = _curl(*ca, "-i", f"{ng.hub_url}/org/gpt2/resolve/v1/model.safetensors")
        s, h = _head(p.stdout)
        expect(f"hub: resolve of an LFS file: 302 to the CDN with X-Linked-Size, X-Linked-Etag, X-Repo-Commit ({s})",
               s == 302 and h.get("location", "").startswith(ng.cdn_url + "/repos/") and h.get("x-linked-size") == str(len(stdata))
               and h.get("x-linked-etag") == '"' + hashlib.sha256(stdata).hexdigest() + '"' and h.get("x-repo-commit") == commit)
        p = _curl(*ca, "-L", "-i", "-r", "0-7", f"{ng.hub_url}/org/gpt2/resolve/v1/model.safetensors")
        s, h = _head(p.stdout)
        expect(f"hub: following the redirect, the CDN serves the range ({s})", s == 206 and p.stdout.endswith(stdata[:8]) and "etag" in h)
        p = _curl(*ca, "-I", "-L", f"{ng.hub_url}/org/gpt2/resolve/{commit}/model.safetensors")
        expect("hub: HEAD at the commit, redirected: 200 with the size", _head(p.stdout)[0] == 200 and _head(p.stdout)[1].get("content-length") == str(len(stdata)))
        cfgdata = open(os.path.join(gpt2, "config.json"), "rb").read()
        p = _curl(*ca, "-i", "-r", "0-4", f"{ng.hub_url}/org/gpt2/resolve/main/config.json")
        s, h = _head(p.stdout)
        expect(f"hub: a git file is served by the Hub itself with Range ({s})", s == 206 and p.stdout.endswith(cfgdata[:5]) and h.get("x-repo-commit"))
        p = _curl(*ca, "-i", f"{ng.hub_url}/org/gpt2/resolve/main/nope.bin")
        s, h = _head(p.stdout)
        expect(f"hub: unknown file: 404 EntryNotFound ({s} {h.get('x-error-code')})", s == 404 and h.get("x-error-code") == "EntryNotFound")
        p = _curl(*ca, "-i", f"{ng.hub_url}/org/gpt2/resolve/nope/config.json")
        expect("hub: unknown revision in resolve: 404 RevisionNotFound", _head(p.stdout)[1].get("x-error-code") == "RevisionNotFound")
        # credentials and the CDN
        loc = _head(_curl(*ca, "-i", f"{ng.hub_url}/org/gpt2/resolve/main/model-00001-of-00003.safetensors").stdout)[1]["location"]
        p = _curl(*ca, "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer leak", loc)
        expect(f"cdn: a request with Authorization is a 403 ({p.stdout})", p.stdout == b"403")
        p = _curl(*ca, "-o", "/dev/null", "-w", "%{http_code}", loc.split("?")[0])
        expect(f"cdn: without the signed query: 403 ({p.stdout})", p.stdout == b"403")
        p = _curl(*ca, "-o", "/dev/null", "-w", "%{http_code}", "-r", "0-1", loc)
        expect(f"cdn: with the query: 206 ({p.stdout})", p.stdout == b"206")
        tok = ng.hf_token
        p = _curl(*ca, "-i", f"{ng.hub_url}/org/gated/resolve/main/model.safetensors")
        s, h = _head(p.stdout)
        expect(f"hub: gated repo without a token: 401 GatedRepo ({s} {h.get('x-error-code')})", s == 401 and h.get("x-error-code") == "GatedRepo")
        p = _curl(*ca, "-i", "-H", "Authorization: Bearer wrong", f"{ng.hub_url}/org/gated/resolve/main/config.json")
        expect("hub: gated repo with a wrong token: 401", _head(p.stdout)[0] == 401)
        p = _curl(*ca, "-o", "/dev/null", "-w", "%{http_code}", f"{ng.hub_url}/api/models/org/gated/tree/main")
        expect("hub: gated repo: the listing is open (as on the Hub)", p.stdout == b"200")
        # curl -L with a custom Authorization header keeps it only on the first host (curl >= 7.58, port too since 7.83)
        p = _curl(*ca, "-L", "-o", "/dev/null", "-w", "%{http_code}", "-r", "0-1", "-H", f"Authorization: Bearer {tok}",
                  f"{ng.hub_url}/org/gated/resolve/main/model.safetensors")
        expect(f"hub: gated repo with the token, redirected to the CDN without it: 206 ({p.stdout})", p.stdout == b"206")
        cdn = [e for e in ng.requests("cdn")][-1]
        expect("cdn: the access log shows no Authorization on that request", cdn["auth"] == "0" and cdn["range"] == "bytes=0-1")
        p = _curl(*ca, "-L", "-o", "/dev/null", "-w", "%{http_code}", "--location-trusted", "-H", f"Authorization: Bearer {tok}",
                  f"{ng.hub_url}/org/gated/resolve/main/model.safetensors")
        expect(f"hub: a client that forwards the token to the CDN gets 403 ({p.stdout})", p.stdout == b"403")
        p = _curl(*ca, "-o", "/dev/null", "-w", "%{http_code}", f"{ng.hub_url}/api/models/org/private/tree/main")
        expect(f"hub: private repo listing without a token: 401 ({p.stdout})", p.stdout == b"401")
        p = _curl(*ca, "-o", "/dev/null", "-w", "%{http_code}", "-H", f"Authorization: Bearer {tok}", f"{ng.hub_url}/api/models/org/private/tree/main")
        expect(f"hub: private repo listing with the token: 200 ({p.stdout})", p.stdout == b"200")
        log = ng.requests("hub")
        expect("hub: access log records auth presence, never the value", all(e["auth"] in ("0", "1") for e in log)
               and tok not in open(os.path.join(ng.dir, "nginx", "access.log")).read())

    # S3 ---------------------------------------------------------------------------------------------
    with S3Server() as s3:
        s3.create_bucket("ckpt")
        s3.put("ckpt", "models/sd.pt", sd)
        s3.put("ckpt", "models/model.safetensors", st)
        s3.put("ckpt", "other/x.pt", sd)
        url = f"{s3.endpoint}/ckpt/models/sd.pt"
        p = s3.curl("-i", "-r", "0-9", url)
        s, h = _head(p.stdout.encode("latin-1") if isinstance(p.stdout, str) else p.stdout)
        expect(f"s3: signed GET with Range: 206, Content-Range, ETag ({s})",
               s == 206 and h.get("content-range") == f"bytes 0-9/{len(data)}" and h.get("etag") == '"' + hashlib.md5(data).hexdigest() + '"')
        p = subprocess.run(["curl", "-sS", "-i", "-r", "-22", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "CKPTTEST:CKPTTEST",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", url], capture_output=True, timeout=30)
        s, h = _head(p.stdout)
        expect(f"s3: suffix range -22 is the last 22 bytes ({s} {h.get('content-range')})",
               s == 206 and p.stdout.endswith(data[-22:]) and h.get("content-range") == f"bytes {len(data) - 22}-{len(data) - 1}/{len(data)}")
        p = s3.curl("-i", "-r", "0-9", url, secret="WRONG")
        s, _ = _head(p.stdout.encode("latin-1"))
        expect(f"s3: a wrong secret: 403 SignatureDoesNotMatch ({s})", s == 403 and "<Code>SignatureDoesNotMatch</Code>" in p.stdout)
        p = s3.curl("-i", url, access_key="NOPE")
        expect("s3: an unknown access key: 403 InvalidAccessKeyId", "<Code>InvalidAccessKeyId</Code>" in p.stdout)
        p = _curl("-i", url)
        expect("s3: no credentials: 403 AccessDenied", _head(p.stdout)[0] == 403 and b"AccessDenied" in p.stdout)
        p = subprocess.run(["curl", "-sS", "-i", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "CKPTTEST:CKPTTEST", url], capture_output=True, timeout=30)
        expect("s3: SigV4 without x-amz-content-sha256: 400 InvalidRequest", _head(p.stdout)[0] == 400 and b"x-amz-content-sha256" in p.stdout)
        p = subprocess.run(["curl", "-sS", "-i", "--aws-sigv4", "aws:amz:eu-west-1:s3", "--user", "CKPTTEST:CKPTTEST",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", url], capture_output=True, timeout=30)
        expect("s3: wrong region: 400 AuthorizationHeaderMalformed", b"AuthorizationHeaderMalformed" in p.stdout and b"us-east-1" in p.stdout)
        p = subprocess.run(["curl", "-sS", "-i", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "CKPTTEST:CKPTTEST",
                            "-H", "x-amz-content-sha256: " + "0" * 64, url], capture_output=True, timeout=30)
        expect("s3: a payload hash that is not the body's: 400 XAmzContentSHA256Mismatch", b"XAmzContentSHA256Mismatch" in p.stdout)
        p = subprocess.run(["curl", "-sS", "-i", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", "CKPTTEST:CKPTTEST",
                            "-H", "x-amz-content-sha256: " + EMPTY_SHA256, "-r", "0-3", url], capture_output=True, timeout=30)
        expect("s3: the empty body's sha256 (what libcurl users send): 206", _head(p.stdout)[0] == 206)
        p = s3.curl("-i", "-r", "0-3", "-H", 'If-Match: "nope"', url)
        expect("s3: If-Match another ETag: 412 PreconditionFailed", "PreconditionFailed" in p.stdout)
        p = s3.curl("-I", url)
        s, h = _head(p.stdout.encode("latin-1"))
        expect(f"s3: HEAD gives the size and ETag ({s})", s == 200 and h.get("content-length") == str(len(data)) and h.get("etag"))
        # curl 7.88's --aws-sigv4 signs the query as written (not sorted, not re-encoded): give it the
        # canonical form (names sorted, values UriEncoded, '/' as %2F) or S3 refuses the signature
        p = s3.curl(f"{s3.endpoint}/ckpt?delimiter=%2F&list-type=2&prefix=models%2F")
        keys = re.findall(r"<Key>([^<]+)</Key>", p.stdout)
        sizes = re.findall(r"<Size>(\d+)</Size>", p.stdout)
        expect(f"s3: ListObjectsV2 prefix=models/ delimiter=/ ({keys})", keys == ["models/model.safetensors", "models/sd.pt"] and sizes == [str(len(stdata)), str(len(data))])
        p = s3.curl(f"{s3.endpoint}/ckpt?delimiter=%2F&list-type=2")
        expect("s3: ListObjectsV2 at the root: CommonPrefixes", re.findall(r"<Prefix>([^<]+)</Prefix>", p.stdout) == ["models/", "other/"])
        p = s3.curl(f"{s3.endpoint}/ckpt?list-type=2&max-keys=1&prefix=models%2F")
        tokm = re.search(r"<NextContinuationToken>([^<]+)</NextContinuationToken>", p.stdout)
        expect("s3: ListObjectsV2 max-keys=1 is truncated with a continuation token", "<IsTruncated>true</IsTruncated>" in p.stdout and tokm)
        if tokm:
            tq = urllib.parse.quote(tokm.group(1), safe="-_.~")
            p = s3.curl(f"{s3.endpoint}/ckpt?continuation-token={tq}&list-type=2&max-keys=1&prefix=models%2F")
            expect("s3: the continuation token gives the next key", re.findall(r"<Key>([^<]+)</Key>", p.stdout) == ["models/sd.pt"])
        p = s3.curl(f"{s3.endpoint}/ckpt?list-type=2&prefix=models/&delimiter=/")
        if "SignatureDoesNotMatch" in p.stdout:
            print("note curl " + subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split()[1]
                  + " signs a non-canonical query as written: refused (403 SignatureDoesNotMatch), as S3 would refuse it")
        else:
            print("note this curl canonicalizes the query before signing")
        p = s3.curl("-i", f"{s3.endpoint}/ckpt/models/nope.pt")
        expect("s3: unknown key: 404 NoSuchKey", "NoSuchKey" in p.stdout)
        s3.add_credentials("TEMPKEY", "TEMPSECRET", "SESSIONTOKEN")
        p = s3.curl("-o", "/dev/null", "-w", "%{http_code}", "-H", "x-amz-security-token: SESSIONTOKEN", url, access_key="TEMPKEY", secret="TEMPSECRET")
        expect(f"s3: session credentials with x-amz-security-token: 200 ({p.stdout})", p.stdout == "200")
        p = s3.curl("-o", "/dev/null", "-w", "%{http_code}", url, access_key="TEMPKEY", secret="TEMPSECRET")
        expect(f"s3: session credentials without the token: 403 ({p.stdout})", p.stdout == "403")
        expect("s3: the gateway logged every request", len(s3.requests) >= 15)

    # the misbehaving server ----------------------------------------------------------------------------
    with MisbehavingServer({"sd.pt": sd}, stall_seconds=5) as bad:
        u = lambda kind: bad.url_for(kind, "sd.pt")  # noqa: E731
        p = _curl("-i", "-r", "0-9", u("ok"))
        s, h = _head(p.stdout)
        expect(f"bad: ok: 206 ({s} {h.get('content-range')})", s == 206 and h.get("content-range") == f"bytes 0-9/{len(data)}" and p.stdout.endswith(data[:10]))
        etag = h["etag"]
        p = _curl("-i", "-r", "-5", u("ok"))
        expect("bad: ok: suffix range", p.stdout.endswith(data[-5:]) and _head(p.stdout)[0] == 206)
        p = _curl("-i", "-r", "0-9", "-H", f"If-Range: {etag}", u("ok"))
        expect("bad: ok: If-Range match: 206", _head(p.stdout)[0] == 206)
        p = _curl("-i", "-r", "0-9", "-H", 'If-Range: "x"', u("ok"))
        expect("bad: ok: If-Range mismatch: 200 whole", _head(p.stdout)[0] == 200 and p.stdout.endswith(data))
        p = _curl("-i", "-r", f"{len(data)}-", u("ok"))
        expect("bad: ok: 416 past the end", _head(p.stdout)[0] == 416)
        p = _curl("-I", u("ok"))
        expect("bad: ok: HEAD", _head(p.stdout)[1].get("content-length") == str(len(data)))
        for kind, code in (("missing", 404), ("auth", 401), ("forbidden", 403)):
            p = _curl("-o", "/dev/null", "-w", "%{http_code}", u(kind))
            expect(f"bad: {kind}: {code}", p.stdout == str(code).encode())
        codes = [_curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "0-9", u("flaky")).stdout for _ in range(3)]
        codes.append(_curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "10-19", u("flaky")).stdout)
        codes.append(_curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "10-19", u("flaky")).stdout)
        expect(f"bad: flaky: 500 then 206 per range ({codes})", codes == [b"500", b"206", b"206", b"500", b"206"])
        p = _curl("-i", "-r", "0-9", u("busy"))
        s, h = _head(p.stdout)
        expect("bad: busy: 429 with Retry-After: 1, then 206", s == 429 and h.get("retry-after") == "1"
               and _curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "0-9", u("busy")).stdout == b"206")
        p = _curl("-i", "-r", "0-9", u("norange"))
        s, h = _head(p.stdout)
        expect(f"bad: norange: 200 with the whole body ({s})", s == 200 and p.stdout.endswith(data) and h.get("content-length") == str(len(data)))
        p = _curl("-i", "-r", "0-9", u("etag"))
        e1 = _head(p.stdout)[1].get("etag")
        p = _curl("-i", "-r", "10-19", "-H", f"If-Range: {e1}", u("etag"))
        s, h = _head(p.stdout)
        expect(f"bad: etag: the ETag changes and a stale If-Range gets 200 whole ({e1} -> {h.get('etag')}, {s})",
               s == 200 and h.get("etag") != e1 and p.stdout.endswith(data))
        p = _curl("-i", "-r", "10-19", u("etag"))
        expect("bad: etag: without If-Range a 206 with the new ETag", _head(p.stdout)[0] == 206 and _head(p.stdout)[1].get("etag") != e1)
        t0 = time.monotonic()
        p = _curl("-r", "0-9", "-o", "/dev/null", "-w", "%{http_code}", "-y", "2", "-Y", "1", u("stall"), timeout=30)
        dt = time.monotonic() - t0
        expect(f"bad: stall: headers then nothing; curl's speed limit gives up (rc {p.returncode}, {dt:.1f} s)", p.returncode == 28 and p.stdout == b"206" and dt < 5)
        p = _curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "0-9", u("reset"))
        expect(f"bad: reset: the first request gets no response (rc {p.returncode})", p.returncode in (52, 56))
        p = _curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "0-9", u("reset"))
        expect(f"bad: reset: then 206 ({p.stdout})", p.stdout == b"206")
        for _ in range(2):
            p = _curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "0-99", u("short"))
            expect(f"bad: short: a 206 cut short: curl error 18 (rc {p.returncode})", p.returncode == 18)
        p = _curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "0-99", u("shortonce"))
        p2 = _curl("-o", "/dev/null", "-w", "%{http_code}", "-r", "0-99", u("shortonce"))
        expect(f"bad: shortonce: cut short once, then whole ({p.returncode}, {p2.stdout})", p.returncode == 18 and p2.stdout == b"206")
        p = _curl("-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer x", u("ok"))
        expect("bad: requests record method, range, auth presence", bad.requests[-1]["auth"] is True and bad.requests[0]["range"] == "bytes=0-9"
               and bad.count("flaky") == 5)
        with MisbehavingServer({"sd.pt": sd}) as other:
            bad.redirect_to = other.url
            p = _curl("-i", "-r", "0-9", "-H", "x-amz-security-token: T", u("redirect"))
            s, h = _head(p.stdout)
            expect(f"bad: redirect: 307 to the second server ({s} {h.get('location')})", s == 307 and h.get("location") == other.url_for("ok", "sd.pt"))
            p = _curl("-sS", "-L", "-r", "0-9", "-H", "x-amz-security-token: T", u("redirect"))
            expect("bad: redirect: the second server records credential headers (curl -L forwards a custom one)",
                   p.stdout == data[:10] and other.requests and other.requests[-1]["creds"] == ["X-Amz-Security-Token"])
        p = _curl("-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", u("loop"))
        expect(f"bad: loop: 302 to itself ({p.stdout})", p.stdout == f"302 {u('loop')}".encode())
        p = _curl("-o", "/dev/null", "-w", "%{http_code} %{redirect_url}", u("scheme"))
        expect(f"bad: scheme: 302 to file:// ({p.stdout})", p.stdout == b"302 file:///etc/passwd")
        t0 = time.monotonic()
        p = _curl("-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-m", "2", u("endless302"), timeout=30)
        expect(f"bad: endless302: a 302 whose body goes on ({p.stdout})", p.returncode == 28 and p.stdout.startswith(b"302 ")
               and int(p.stdout.split()[1]) > (1 << 20))
        for kind, code in (("drip206", b"206"), ("drip404", b"404")):
            p = _curl("-r", "0-99", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-m", "3", u(kind), timeout=30)
            n = int(p.stdout.split()[1]) if p.stdout.split()[1:] else -1
            expect(f"bad: {kind}: 2 bytes a second ({p.stdout})", p.returncode == 28 and p.stdout.startswith(code) and 2 <= n <= 10)
        p = _curl("-r", "0-99999", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-m", "2", u("slowloris"), timeout=30)
        n = int(p.stdout.split()[1]) if p.stdout.split()[1:] else -1
        expect(f"bad: slowloris: ~2 KiB a second ({p.stdout})", p.returncode == 28 and 2048 <= n <= 8192)
        h1 = _head(_curl("-i", "-r", "0-9", u("lmchange")).stdout)[1]
        time.sleep(1.1)
        p = _curl("-i", "-r", "0-9", u("lmchange"))
        h2 = _head(p.stdout)[1]
        expect(f"bad: lmchange: no ETag, a new Last-Modified and new bytes ({h1.get('last-modified')} -> {h2.get('last-modified')})",
               "etag" not in h1 and h1.get("last-modified") != h2.get("last-modified") and not p.stdout.endswith(data[:10]))
        h = _head(_curl("-i", "-r", "0-9", u("novalidator")).stdout)[1]
        expect("bad: novalidator: neither ETag nor Last-Modified", "etag" not in h and "last-modified" not in h)

    print(f"{len(fails)} failures")
    return 1 if fails else 0


def serve(root):
    td = os.path.join(root, "testdata")
    gpt2 = os.path.join(td, "hf211", "gpt2_tiny")
    sd = os.path.join(td, "t211", "sd_compiled_211.pt")
    st = os.path.join(td, "t211", "hf_bert_bf16", "model.safetensors")
    ng = NginxServers()
    ng.add_file("sd_compiled_211.pt", sd)
    ng.add_file("model.safetensors", st)
    ng.add_hf_repo("org", "gpt2", "main", {p: os.path.join(gpt2, p) for p in os.listdir(gpt2)})
    ng.add_hf_repo("org", "gated", "main", {"model.safetensors": st}, access="gated")
    with ng, S3Server() as s3, MisbehavingServer({"sd_compiled_211.pt": sd, "model.safetensors": st}) as bad:
        s3.create_bucket("ckpt")
        s3.put("ckpt", "models/sd_compiled_211.pt", sd)
        s3.put("ckpt", "models/model.safetensors", st)
        print(f"http:   {ng.http_url}/sd_compiled_211.pt  {ng.http_url}/model.safetensors  (https: {ng.https_url}/...)")
        print(f"hub:    hf://org/gpt2  hf://org/gated/model.safetensors (HF_TOKEN={ng.hf_token})")
        print("s3:     s3://ckpt/models/  s3://ckpt/models/sd_compiled_211.pt")
        print(f"bad:    {bad.url}/KIND/sd_compiled_211.pt  KIND in {', '.join(KINDS)}")
        print(f"export SSL_CERT_FILE={ng.cert} HF_ENDPOINT={ng.hub_url} AWS_ENDPOINT_URL={s3.endpoint} "
              f"AWS_ACCESS_KEY_ID=CKPTTEST AWS_SECRET_ACCESS_KEY=CKPTTEST AWS_REGION=us-east-1")
        print(f"logs: {ng.dir}/nginx/access.log; Ctrl-C stops", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(HERE)))
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--selftest", action="store_true", help="start every server, check each behaviour with curl, stop")
    g.add_argument("--serve", action="store_true", help="start them with a few testdata files until Ctrl-C")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return selftest(a.root) if a.selftest else serve(a.root)
    except Unavailable as e:
        if os.environ.get("CKPT_REMOTE_OPTIONAL") == "1":
            print(f"skipped: {e}")
            return 77
        print(f"FAIL {e} (set CKPT_REMOTE_OPTIONAL=1 to skip instead)")
        return 1


if __name__ == "__main__":
    sys.exit(main())
