#!/usr/bin/env python3
"""`ckpt load --device cuda` against the link and the Python loaders, in one run on one machine (not CI).

On a GPU machine with a CUDA torch (bench/CUDA.md says how to build ckpt there):

    python3 bench/cuda_load.py --ckpt BUILD/ckpt [--workdir /tmp/ckpt-cuda] [--runs 3] [--out cuda.json]
                               [--timeout 120] [--gen-timeout 1800] [--no-sweep] [--no-peers] [--dry-run]

It writes a GPT-2-large-shaped fp32 state dict (437 entries, tied embedding, 3.1 GB) and its safetensors twin
into --workdir (kept for the next run), then measures, page cache warm and then cold (each file's pages
evicted with posix_fadvise(DONTNEED), and /proc/sys/vm/drop_caches where writable, before every cold run):

  - the pinned and pageable host-to-device bandwidth (1 GiB, torch), and `dd iflag=direct bs=64M` of the file;
  - ckpt load --device cuda, by default and, with --sweep (the default), with --chunk C --ring R for C in 2M, 4M,
    8M, 16M, 32M and R = 2 x C x readers and 4 x that (readers = min(cores, 8)): the load phase (the report's
    time.load_seconds, and bytes_read / load_seconds), the whole process, peak RSS and the report's stream
    object (threads, slots, chunk, ring, bytes by read path); the same file's safetensors twin by default;
  - torch.load(map_location="cuda"), torch.load(mmap=True) then .to("cuda"), safetensors load_file(device="cuda"),
    the call alone (inside one Python process that has imported torch and made its CUDA context) and as whole
    processes (peak RSS: each process's own VmHWM);

and prints each figure as it is measured, then the start-up breakdown of the default configuration (the
report's time object), the sweep, its best configuration and the goals of issue 40: load phase >= 0.5 of
pinned H2D, whole process <= 0.7 s, peak RSS <= 1 GB, cold load phase >= 0.7 of dd's direct read, no stall.

Nothing runs inside this process but the bookkeeping and the reads that warm the page cache: ckpt, dd, sync
and every torch or safetensors call run in child processes, each in a session of its own and bounded by
--timeout (the calls alone share one child, and the limit bounds its import of torch and CUDA context and
each call; writing the files has --gen-timeout); one that runs past it is killed with its process group,
recorded as {"timeout": true, "seconds": T} and counted against the last goal, and the bench goes on with the
next step, as it does after a run that fails. The results are written to --out (default
WORKDIR/cuda_load.json; a temporary file, then os.replace) after every run, so a bench that is killed leaves
everything measured until then; SIGINT, SIGTERM and SIGHUP kill the running child's group first.

--dry-run runs the same steps on the CPU with a 64 MiB file (ckpt load --device cpu --stream, the CPU twin of
the streaming load; the peers on cpu), to try the script anywhere: its figures mean nothing.
"""
import argparse
import json
import os
import selectors
import signal
import statistics
import subprocess
import sys
import time

ap = argparse.ArgumentParser(description="ckpt load --device cuda against the link and the Python loaders")
ap.add_argument("--ckpt", required=True, help="the ckpt binary")
ap.add_argument("--workdir", default="/tmp/ckpt-cuda", help="where the checkpoints are, or are written")
ap.add_argument("--runs", type=int, default=3, help="timed runs per configuration and per peer")
ap.add_argument("--out", default="", help="results (JSON), rewritten after every run; default WORKDIR/cuda_load.json")
ap.add_argument("--timeout", type=float, default=120, help="seconds one run may take before it is killed")
ap.add_argument("--gen-timeout", type=float, default=1800, help="seconds writing the checkpoints may take")
ap.add_argument("--sweep", action=argparse.BooleanOptionalAction, default=True,
                help="sweep --chunk and --ring (--no-sweep: the default configuration only)")
ap.add_argument("--peers", action=argparse.BooleanOptionalAction, default=True,
                help="time torch.load and safetensors (--no-peers: ckpt, the link and dd only)")
ap.add_argument("--dry-run", action="store_true", help="the CPU and a 64 MiB file: try the script anywhere")
a = ap.parse_args()
if a.runs < 1 or a.timeout <= 0:
    ap.error("--runs must be at least 1 and --timeout positive")
DEV = "cpu" if a.dry_run else "cuda"
os.makedirs(a.workdir, exist_ok=True)
OUT = os.path.abspath(a.out or os.path.join(a.workdir, "cuda_load.json"))
os.makedirs(os.path.dirname(OUT), exist_ok=True)
PT = os.path.join(a.workdir, "gpt2l_small.pt" if a.dry_run else "gpt2l.pt")
ST = PT[:-3] + ".safetensors"
CORES = len(os.sched_getaffinity(0))
READERS = min(CORES, 8)
MiB = 1 << 20

res = {"schema": "ckpt.cuda_bench/2", "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "args": vars(a),
       "ckpt": os.path.abspath(a.ckpt), "device": "cpu (dry run)" if a.dry_run else None, "cores": CORES,
       "readers": READERS, "file": PT, "timeouts": [], "errors": [], "warm": {}, "cold": {}, "done": False}


def save():
    """The results so far, atomically: a killed bench leaves the last complete file."""
    tmp = f"{OUT}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    os.replace(tmp, OUT)


def say(*args):
    print(*args, flush=True)


# ---- children: every one in its own session, bounded, killed with its process group past the timeout

def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def reap(p, wait_s):
    """wait4 within wait_s (a process stuck in a driver call dies only when the call returns): (status, rusage)."""
    end = time.perf_counter() + wait_s
    while True:
        try:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        except ChildProcessError:
            return 0, None
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
            return status, ru
        if time.perf_counter() >= end:
            return None, None
        time.sleep(0.01)


def spawn(cmd, label, timeout=None, per_line=False, on_line=None):
    """Runs cmd (stdin /dev/null, stdout and stderr read here) in a session of its own. Past `timeout`
    seconds (per_line: from its start or from its last line on stdout) the whole process group is killed.
    Returns {"rc", "out", "err", "seconds" (spawn to exit), "maxrss" (wait4: the child and its reaped
    descendants, bytes)}, or {"timeout": True, "seconds", "out", "err"}. on_line(dict) gets every stdout line
    that is a JSON object, as it comes. label: a string, or a function that says what was running."""
    timeout = a.timeout if timeout is None else timeout
    t0 = time.perf_counter()
    try:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    except OSError as e:  # not there, not executable: a failed step like any other
        return {"rc": 127, "out": "", "err": f"{cmd[0]}: {e}", "seconds": 0.0, "maxrss": None}
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, "out")
    sel.register(p.stderr, selectors.EVENT_READ, "err")
    try:
        pidfd = os.pidfd_open(p.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    except (AttributeError, OSError):
        pidfd = None
    buf = {"out": bytearray(), "err": bytearray()}
    line_at = 0  # stdout up to here has been handed to on_line
    deadline = t0 + timeout
    status = rusage = ended = None
    finished = False
    try:
        while True:
            if status is None and pidfd is None:
                st, ru = reap(p, 0)
                if st is not None:
                    status, rusage, ended = st, ru, time.perf_counter()
            if status is not None and not any(k.data in buf for k in sel.get_map().values()):
                finished = True
                break
            now = time.perf_counter()
            if now >= deadline:
                break
            wait = deadline - now if pidfd is not None or status is not None else min(deadline - now, 0.002)
            for key, _ in sel.select(wait):
                if key.data == "exit":
                    ended = time.perf_counter()
                    sel.unregister(pidfd)
                    os.close(pidfd)
                    pidfd = None
                    status, rusage = reap(p, 5)
                    if status is None:  # the pidfd said it exited: cannot happen, but never block on it
                        status = 0
                    continue
                data = os.read(key.fd, 1 << 16)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                buf[key.data] += data
                if key.data == "out" and b"\n" in data:
                    if per_line:
                        deadline = time.perf_counter() + timeout
                    end = buf["out"].rfind(b"\n") + 1
                    for line in bytes(buf["out"][line_at:end]).splitlines():
                        if on_line and line.startswith(b"{"):
                            try:
                                on_line(json.loads(line))
                            except ValueError:
                                pass
                    line_at = end
    finally:
        if not finished:
            kill_group(p)  # past the deadline, or the bench itself interrupted
            if status is None:
                reap(p, 10)
        if pidfd is not None:
            os.close(pidfd)
        sel.close()
        p.stdout.close()
        p.stderr.close()
    out, err = buf["out"].decode(errors="replace"), buf["err"].decode(errors="replace")
    if not finished:
        secs = round(time.perf_counter() - (deadline - timeout), 3)  # per_line: since the last line
        name = label() if callable(label) else label
        res["timeouts"].append(f"{name} ({secs} s)")
        say(f"  TIMEOUT {name}: killed after {secs} s (--timeout {timeout:g})")
        return {"timeout": True, "seconds": secs, "out": out, "err": err}
    return {"rc": os.waitstatus_to_exitcode(status), "out": out, "err": err, "seconds": ended - t0,
            "maxrss": rusage.ru_maxrss * 1024 if rusage else None}


def failed(x, label, what=None):
    """A child that timed out or failed, as recorded in the results (the bench goes on); None if it ran."""
    if x.get("timeout"):
        return {"timeout": True, "seconds": x["seconds"]}
    if x["rc"] != 0 or what:
        why = what or (x["err"].strip() or x["out"].strip())[-500:]
        res["errors"].append(f"{label}: exit {x['rc']}")
        lines = why.splitlines() or [""]
        line = next((t for t in reversed(lines) if "error" in t.lower()), lines[-1])  # ckpt's, or Python's
        say(f"  FAILED {label}: exit {x['rc']}: {line}")
        return {"error": why, "rc": x["rc"]}
    return None


# ---- the page cache: the same code here and in the Python children

PREP = r'''
import os, subprocess
def evict(path, sync=lambda: subprocess.run(["sync"])):
    sync()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("1\n")
    except OSError:
        pass
def warm(path):
    buf = bytearray(16 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass
'''
exec(PREP)


def prepare(path, cold):
    if cold:
        evict(path, sync=lambda: spawn(["sync"], "sync"))  # noqa: F821 (from PREP)
    else:
        warm(path)  # noqa: F821


def best(ts):
    return {"best_s": round(min(ts), 4), "median_s": round(statistics.median(ts), 4)}


def size(n):
    """Bytes as ckpt's --ring / --chunk take them (k, M, G: x1024)."""
    for unit, shift in (("G", 30), ("M", 20), ("k", 10)):
        if n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def python(code, *params):
    return [sys.executable, "-c", code, *(json.dumps(p) for p in params)]


# ---- the files

GEN = r'''
import json, os, sys
import torch
P = json.loads(sys.argv[1])
try:
    from safetensors.torch import save_file
except ImportError:
    save_file = None
d, L, V, N = (256, 4, 50257, 1024) if P["dry"] else (1280, 36, 50257, 1024)
gen = torch.Generator(device=P["dev"]).manual_seed(0)
sd = {"transformer.wte.weight": (V, d), "transformer.wpe.weight": (N, d)}
for i in range(L):
    for k, s in [("ln_1.weight", (d,)), ("ln_1.bias", (d,)), ("attn.c_attn.weight", (d, 3 * d)),
                 ("attn.c_attn.bias", (3 * d,)), ("attn.c_proj.weight", (d, d)), ("attn.c_proj.bias", (d,)),
                 ("ln_2.weight", (d,)), ("ln_2.bias", (d,)), ("mlp.c_fc.weight", (d, 4 * d)),
                 ("mlp.c_fc.bias", (4 * d,)), ("mlp.c_proj.weight", (4 * d, d)), ("mlp.c_proj.bias", (d,))]:
        sd[f"transformer.h.{i}.{k}"] = s
sd["transformer.ln_f.weight"] = sd["transformer.ln_f.bias"] = (d,)
sd = {k: torch.randn(*s, device=P["dev"], generator=gen).cpu() for k, s in sd.items()}
if save_file:
    save_file(sd, P["st"] + ".tmp")
    os.replace(P["st"] + ".tmp", P["st"])
sd["lm_head.weight"] = sd["transformer.wte.weight"]
torch.save(sd, P["pt"] + ".tmp")
os.replace(P["pt"] + ".tmp", P["pt"])
'''

INFO = r'''
import json, sys, time
P = json.loads(sys.argv[1])
def put(**k):
    print(json.dumps(k), flush=True)
import torch
try:
    import safetensors
    put(torch=torch.__version__, safetensors=safetensors.__version__)
except ImportError:
    put(torch=torch.__version__, safetensors=None)
if P["dev"] == "cuda":
    if not torch.cuda.is_available():
        put(no_cuda=True)
        sys.exit(0)
    put(device=torch.cuda.get_device_name(0), cuda=torch.version.cuda)
    n = 1 << 30
    dv = torch.empty(n, dtype=torch.uint8, device="cuda")
    for name in ("pinned", "pageable"):
        src = torch.ones(n, dtype=torch.uint8)
        if name == "pinned":
            src = src.pin_memory()
        dv.copy_(src, non_blocking=True)
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            dv.copy_(src, non_blocking=True)
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t)
        put(**{f"h2d_{name}_GBps": round(n / min(ts) / 1e9, 2)})
        del src
'''


def step_files():
    if os.path.exists(PT) and (os.path.exists(ST) or res.get("safetensors", 1) is None):
        return True
    say(f"writing {PT} and its safetensors twin (once; kept in {a.workdir})")
    x = spawn(python(GEN, {"dry": a.dry_run, "dev": DEV, "pt": PT, "st": ST}), "writing the checkpoints",
              timeout=a.gen_timeout)
    bad = failed(x, "writing the checkpoints")
    if bad:
        res["files"] = bad
        return False
    say(f"  {x['seconds']:.1f} s")
    return os.path.exists(PT)


def step_info():
    def got(d):
        res.update(d)
        for k, v in d.items():
            if k.startswith("h2d_"):
                say(f"host-to-device {k.split('_')[1]}: {v} GB/s")
    x = spawn(python(INFO, {"dev": DEV}), "torch, device, host-to-device", per_line=True, on_line=got)
    bad = failed(x, "torch, device, host-to-device")
    if bad:
        res["info"] = bad
    if res.get("no_cuda"):
        save()
        sys.exit("no CUDA device visible to torch (use --dry-run to try the script on the CPU)")
    say(f"torch {res.get('torch')}, device {res.get('device')}")


def step_dd():
    ts = []
    for i in range(a.runs):
        prepare(PT, True)
        x = spawn(["dd", f"if={PT}", "of=/dev/null", "bs=64M", "iflag=direct"], f"dd iflag=direct run {i + 1}")
        bad = failed(x, "dd iflag=direct")
        if bad:
            res["dd_direct"] = bad
            return
        ts.append(x["seconds"])
    res["dd_direct"] = best(ts)
    res["dd_direct_GBps"] = round(os.path.getsize(PT) / min(ts) / 1e9, 2)
    say(f"dd iflag=direct bs=64M: {res['dd_direct_GBps']} GB/s ({min(ts):.3f} s)")


# ---- ckpt

TIME_KEYS = ("startup_seconds", "read_seconds", "plan_seconds", "context_seconds", "ring_seconds",
             "ring_wait_seconds", "load_seconds", "count_seconds", "seconds")


def stream_line(s):
    if not s:
        return "no stream object"
    read = ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in (s.get("read") or {}).items() if v)
    ring, chunk = s.get("ring_bytes"), s.get("chunk_bytes")
    return (f"threads {s.get('threads')}, {s.get('slots')} slots of {size(chunk) if chunk else '?'}"
            f" (ring {size(ring) if ring else '?'}); read: {read or 'nothing'}")


def ckpt_config(state, label, extra, path):
    """`runs` runs of one configuration; the first that times out or fails ends it."""
    cold = state == "cold"
    cmd = [a.ckpt, "load", "--json", "--device", DEV, *(["--stream"] if a.dry_run else []), *extra, path]
    r = res[state][label] = {"command": " ".join(cmd[1:-1]), "runs": []}
    reps = []
    for i in range(a.runs):
        prepare(path, cold)
        run = f"{state} {label} run {i + 1}"
        x = spawn(cmd, run)
        bad = failed(x, run)
        if not bad:
            try:
                rep = json.loads(x["out"])
                t = rep["time"]
                nbytes = rep["totals"]["bytes_read"]
            except (ValueError, KeyError, TypeError) as e:
                bad = failed(x, run, f"the report is not ckpt.load/1 JSON: {e!r}")
        if bad:
            r.update(bad)
            save()
            return r
        reps.append((x, rep))
        q = {"process_s": round(x["seconds"], 4), "load_s": t.get("load_seconds"),
             "peak_rss_MB": round(rep.get("memory", {}).get("peak_rss_bytes", 0) / 1e6),
             "tree_peak_rss_MB": round(x["maxrss"] / 1e6) if x["maxrss"] else None}
        r["runs"].append(q)
        save()
        say(f"  {run}: process {q['process_s']:.3f} s, load {q['load_s'] or 0:.3f} s "
            f"({nbytes / q['load_s'] / 1e9 if q['load_s'] else 0:.2f} GB/s), peak RSS {q['peak_rss_MB']} MB")
    x, rep = min(reps, key=lambda xr: xr[1]["time"].get("load_seconds") or float("inf"))
    ls, nbytes = rep["time"].get("load_seconds"), rep["totals"]["bytes_read"]
    r.update(best([x["seconds"] for x, _ in reps]),
             load_phase_s=round(ls, 4) if ls else ls,
             load_GBps=round(nbytes / ls / 1e9, 2) if ls else None,
             bytes_read=nbytes,
             peak_rss_MB=max(q["peak_rss_MB"] for q in r["runs"]),
             tree_peak_rss_MB=max((q["tree_peak_rss_MB"] or 0) for q in r["runs"]),
             time=rep["time"], stream=rep.get("stream"))
    save()
    say(f"  {state} {label}, best of {len(reps)}: load {r['load_phase_s']} s, {r['load_GBps']} GB/s; process "
        f"{r['best_s']} s (median {r['median_s']}); peak RSS {r['peak_rss_MB']} MB; {stream_line(r['stream'])}")
    return r


def startup_line(r):
    """Where the default configuration's whole process goes, as the report's time object has it (a key an
    older ckpt lacks counts 0)."""
    t = {k: r.get("time", {}).get(k, 0) or 0 for k in TIME_KEYS}
    return (f"start-up breakdown (default, warm, fastest load): whole process {t['seconds']:.3f} s; start-up "
            f"{t['startup_seconds']:.3f} (exec + LibTorch), read {t['read_seconds']:.3f}, load "
            f"{t['load_seconds']:.3f} (planning {t['plan_seconds']:.3f}, waiting for the ring "
            f"{t['ring_wait_seconds']:.3f}, NaN/Inf count {t['count_seconds']:.3f}); on the ring's thread, "
            f"overlapped: CUDA context {t['context_seconds']:.3f}, allocating the ring {t['ring_seconds']:.3f}")


def sweep():
    """[(label, --chunk/--ring arguments)]: the default, then each chunk with two rings."""
    out = [("ckpt default", [])]
    if a.sweep:
        for c in (2, 4, 8, 16, 32):
            r1 = 2 * c * MiB * READERS
            for r in (r1, 4 * r1):
                out.append((f"ckpt --chunk {c}M --ring {size(r)}", ["--chunk", f"{c}M", "--ring", size(r)]))
    return out


# ---- the peers: each call alone, in one child that has imported torch (and made its CUDA context) before
# it (the timeout bounds that and each call; a child that stops is replaced for the calls left), then each as
# a whole process

CALL = r'''
import json, sys, time
P = json.loads(sys.argv[1])
exec(P["prep"])
def put(**k):
    print(json.dumps(k), flush=True)
t = time.perf_counter()
import torch
try:
    from safetensors.torch import load_file
except ImportError:
    pass
def sync():
    if P["dev"] == "cuda":
        torch.cuda.synchronize()
if P["dev"] == "cuda":
    torch.empty(1, device="cuda")
    sync()
put(ready_s=time.perf_counter() - t)
for i, it in enumerate(P["items"]):
    try:
        for run in range(P["runs"]):
            if it["cold"]:
                evict(it["path"])
            else:
                warm(it["path"])
            sync()
            t = time.perf_counter()
            exec(it["stmt"])
            sync()
            dt = time.perf_counter() - t
            seen, n = set(), 0
            for v in sd.values():
                s = v.untyped_storage()
                if s.data_ptr() not in seen:
                    seen.add(s.data_ptr())
                    n += s.nbytes()
            put(item=i, run=run, s=dt, bytes=n)
            del sd
            if P["dev"] == "cuda":
                torch.cuda.empty_cache()
    except Exception as e:
        put(item=i, error=repr(e)[-500:])
        globals().pop("sd", None)
'''
PRELUDE = "import torch\ntry:\n    from safetensors.torch import load_file\nexcept ImportError:\n    pass\n"
HWM = "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"


def peers():
    """[(state, label, statement, file)]"""
    p = {"torch.load(map_location=dev)": f"sd = torch.load({PT!r}, map_location={DEV!r})",
         "torch.load(mmap=True).to(dev)": f"sd = {{k: v.to({DEV!r}, non_blocking=True) for k, v in "
                                          f"torch.load({PT!r}, mmap=True, map_location='cpu').items()}}"}
    if res.get("safetensors") and os.path.exists(ST):
        p["safetensors load_file(device=dev)"] = f"sd = load_file({ST!r}, device={DEV!r})"
    return [(state, label, stmt, ST if "safetensors" in label else PT) for label, stmt in p.items()
            for state in ("warm", "cold")]


def peer_calls(items):
    """The calls alone: res[state][label]["call"], "call_GBps", "bytes"."""
    runs = {i: [] for i in range(len(items))}
    errors = {}
    todo = list(range(len(items)))
    ready = []
    while todo:
        order = list(todo)  # the child's item k is items[order[k]]
        n = len(ready)  # children started so far that got as far as their first call

        def got(d):
            if "ready_s" in d:
                ready.append(d["ready_s"])
            if "item" not in d:
                return
            i = order[d["item"]]
            state, label = items[i][:2]
            if "error" in d:
                errors[i] = {"error": d["error"]}
                res["errors"].append(f"{state} {label}: the call: {d['error']}")
                say(f"  FAILED {state} {label}: the call: {d['error']}")
            else:
                runs[i].append(d)
                say(f"  {state} {label}: call {d['s']:.3f} s, {d['bytes'] / d['s'] / 1e9:.2f} GB/s")

        def running():
            left = [i for i in order if i not in errors and len(runs[i]) < a.runs]
            if len(ready) == n or not left:
                return "the calls alone: import torch" + (" and the CUDA context" if DEV == "cuda" else "")
            return f"{' '.join(items[left[0]][:2])}: the call alone"
        params = {"prep": PREP, "dev": DEV, "runs": a.runs,
                  "items": [{"stmt": items[i][2], "path": items[i][3], "cold": items[i][0] == "cold"} for i in order]}
        x = spawn(python(CALL, params), running, per_line=True, on_line=got)
        left = [i for i in order if i not in errors and len(runs[i]) < a.runs]
        if left:  # the child stopped in this call, or before the first (then every call left is left out)
            bad = failed(x, running()) or failed(x, running(), "the child stopped early")
            culprits = left[:1] if len(ready) > n else left
            for i in culprits:
                errors[i] = bad
            left = [i for i in left if i not in culprits]
        todo = left
    for i, (state, label, _, _) in enumerate(items):
        r = res[state].setdefault(label, {})
        if i in errors:
            r["call"] = dict(errors[i])
        if runs[i]:
            r.setdefault("call", {}).update(best([d["s"] for d in runs[i]]))
            r["bytes"] = runs[i][0]["bytes"]
            r["call_GBps"] = round(r["bytes"] / min(d["s"] for d in runs[i]) / 1e9, 2)
    save()


def peer_process(state, label, stmt, path):
    """Whole processes, each with its own peak RSS (VmHWM): res[state][label]["process"], "peak_rss_MB"."""
    r = res[state].setdefault(label, {})
    code = PRELUDE + stmt + ("\ntorch.cuda.synchronize()\n" if DEV == "cuda" else "\n") + HWM
    whole, rss = [], []
    for i in range(a.runs):
        prepare(path, state == "cold")
        what = f"{state} {label}: process run {i + 1}"
        x = spawn([sys.executable, "-c", code], what)
        bad = failed(x, what)
        if not bad:
            try:
                rss.append(int(x["out"].split()[-1]) * 1024)
            except (ValueError, IndexError):
                bad = failed(x, what, "no VmHWM line")
        if bad:
            r["process"] = bad
            break
        whole.append(x["seconds"])
        say(f"  {state} {label}: process {x['seconds']:.3f} s, peak RSS {rss[-1] / 1e6:.0f} MB")
    if whole and "process" not in r:
        r["process"] = best(whole)
        r["peak_rss_MB"] = round(max(rss) / 1e6)
    save()


# ---- the summary

def summary():
    w, c = res["warm"], res["cold"]
    d, dc = w.get("ckpt default", {}), c.get("ckpt default", {})
    if "time" in d:
        res["startup"] = {k: d["time"].get(k, 0) for k in TIME_KEYS}
        say(startup_line(d))
    rows = [(label, w.get(label, {}), c.get(label, {})) for label, _ in sweep()]

    def fig(r, k, unit=""):
        if r.get("timeout"):
            return "TIMEOUT"
        if "error" in r:
            return "failed"
        return f"{r[k]}{unit}" if r.get(k) is not None else "-"
    say("\nconfiguration                      warm GB/s  process s  peak RSS MB  cold GB/s")
    for label, rw, rc in rows:
        say(f"{label:<34} {fig(rw, 'load_GBps'):>9}  {fig(rw, 'best_s'):>9}  {fig(rw, 'peak_rss_MB'):>11}  "
            f"{fig(rc, 'load_GBps'):>9}")
    done = [(label, rw, rc) for label, rw, rc in rows if rw.get("load_GBps")]
    if done:
        label, rw, rc = max(done, key=lambda t: t[1]["load_GBps"])
        res["best"] = {"configuration": label, "load_GBps": rw["load_GBps"], "process_s": rw["best_s"],
                       "peak_rss_MB": rw["peak_rss_MB"], "cold_load_GBps": rc.get("load_GBps"),
                       "stream": rw.get("stream")}
        h2d = res.get("h2d_pinned_GBps")
        of = f" ({rw['load_GBps'] / h2d:.2f} of pinned H2D)" if h2d else ""
        say(f"best configuration (fastest warm load phase): {label}: {rw['load_GBps']} GB/s warm{of}, process "
            f"{rw['best_s']} s, peak RSS {rw['peak_rss_MB']} MB, cold {rc.get('load_GBps', '-')} GB/s; "
            f"{stream_line(rw.get('stream'))}")
    st = w.get("safetensors load_file(device=dev)", {})
    if d.get("load_GBps") and st.get("call_GBps"):
        res["load_phase_over_safetensors_call"] = round(d["load_GBps"] / st["call_GBps"], 2)
        say(f"load phase / safetensors load_file call (warm): {res['load_phase_over_safetensors_call']}")

    goals = {}

    def goal(name, value, ok, detail=""):
        goals[name] = {"value": value, "pass": ok}
        say(f"{'PASS' if ok else 'FAIL' if ok is not None else 'n/a '}  {name}: "
            f"{value if value is not None else 'not measured'}{detail if value is not None else ''}")
    say("\ngoals (issue 40), for ckpt's default configuration:")
    h2d = res.get("h2d_pinned_GBps")
    v = round(d["load_GBps"] / h2d, 3) if d.get("load_GBps") and h2d else None
    goal("load phase / pinned H2D >= 0.5", v, v >= 0.5 if v is not None else None,
         f" ({d.get('load_GBps')} of {h2d} GB/s)")
    v = d.get("best_s")
    goal("whole process <= 0.7 s", v, v <= 0.7 if v is not None else None)
    v = d.get("peak_rss_MB")
    goal("peak RSS <= 1000 MB", v, v <= 1000 if v is not None else None)
    dd = res.get("dd_direct_GBps")
    v = round(dc["load_GBps"] / dd, 3) if dc.get("load_GBps") and dd else None
    goal("cold load phase / dd iflag=direct >= 0.7", v, v >= 0.7 if v is not None else None,
         f" ({dc.get('load_GBps')} of {dd} GB/s)")
    goal("no stall anywhere: timed-out runs = 0", len(res["timeouts"]), not res["timeouts"])
    res["goals"] = goals
    if res["errors"]:
        say(f"{len(res['errors'])} step(s) failed: " + "; ".join(res["errors"]))


def main():
    say(f"results: {OUT} (rewritten after every run)")
    save()
    step_info()
    save()
    if not step_files():
        save()
        sys.exit("the checkpoints could not be written (see above)")
    res["file_bytes"] = os.path.getsize(PT)
    save()
    step_dd()
    save()
    cfgs = sweep()
    say(f"ckpt load --device {DEV}{' --stream' if a.dry_run else ''}: {len(cfgs)} configuration(s), readers "
        f"{READERS}, {a.runs} run(s) each, warm then cold")
    for label, extra in cfgs:
        for state in ("warm", "cold"):
            ckpt_config(state, label, extra, PT)
        if label == "ckpt default":
            if "time" in res["warm"][label]:
                say(startup_line(res["warm"][label]))
            if os.path.exists(ST):
                for state in ("warm", "cold"):
                    ckpt_config(state, "ckpt safetensors", [], ST)
    if a.peers:
        items = peers()
        say(f"peers on {DEV}: each call alone, then each as a whole process")
        peer_calls(items)
        for it in items:
            peer_process(*it)
    summary()
    res["done"] = True
    res["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    save()
    say(f"results: {OUT}")


class Interrupted(BaseException):
    pass


def interrupted(sig, frame):
    raise Interrupted(signal.Signals(sig).name)  # unwinds through spawn(), which kills the child's group


if __name__ == "__main__":
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, interrupted)
    try:
        main()
    except (KeyboardInterrupt, Interrupted) as e:
        res["stopped"] = f"interrupted ({e or 'SIGINT'})"
        save()
        sys.exit(f"interrupted: results so far in {OUT}")
    except SystemExit as e:
        if not res["done"]:
            res["stopped"] = str(e.code)
            save()
        raise
