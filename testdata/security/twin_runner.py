#!/usr/bin/env python3
"""Run harmless twins for real: does the mechanism of a corpus file really make Python call its global?

    python3 twin_runner.py JOBS.json OUT.json      (run by gen_security.py, never by a test)

JOBS.json is a list of {"id", "file", "loader": "torch.load"|"pickle.load"|"pickle.loads", "ext": [code,
module, name]|null, "path": [dir to put on sys.path]}. Each job runs in a forked child, in a fresh temporary working
directory, with CKPT_SENTINEL naming a file in it: `torch.load(file, weights_only=False,
map_location="cpu")`, `pickle.load(open(file, "rb"))`, or `pickle.loads` of the bytes (of a zip's
data.pkl: how a scanner reading records into memory parses them), the real loaders, nothing stubbed. The
twins only create the sentinel (`$CKPT_SENTINEL`, or `ckpt-sentinel` in the working directory for
payloads that take a fixed path). OUT.json: {id: {"ran": bool, "error": str|null}}.
"""

import copyreg
import json
import os
import pickle
import shutil
import signal
import sys
import tempfile

TIME_LIMIT = 60


def main():
    jobs_path, out_path = sys.argv[1], sys.argv[2]
    with open(jobs_path) as f:
        jobs = json.load(f)
    import torch  # once, before forking: every child uses it
    out = {}
    for job in jobs:
        tmp = tempfile.mkdtemp(prefix="ckpt-twin-")
        sentinel = os.path.join(tmp, "sentinel")
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            err = None
            try:
                os.chdir(tmp)
                os.environ["CKPT_SENTINEL"] = sentinel
                sys.path[:0] = job.get("path") or []
                if job.get("ext"):
                    code, mod, name = job["ext"]
                    copyreg.add_extension(mod, name, code)
                signal.alarm(TIME_LIMIT)
                if job["loader"] == "torch.load":
                    torch.load(job["file"], weights_only=False, map_location="cpu")
                elif job["loader"] == "pickle.loads":  # from bytes: a zip's data.pkl, or the file
                    with open(job["file"], "rb") as f:
                        data = f.read()
                    if data[:4] == b"PK\x03\x04":
                        import zipfile
                        z = zipfile.ZipFile(job["file"])
                        data = z.read([n for n in z.namelist() if n.endswith("/data.pkl")][0])
                    pickle.loads(data)
                else:
                    with open(job["file"], "rb") as f:
                        pickle.load(f)
            except BaseException as e:  # noqa: BLE001
                err = "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:200])
            signal.alarm(0)
            with os.fdopen(w, "w") as o:
                o.write(json.dumps({"error": err}))
            os._exit(0)
        os.close(w)
        with os.fdopen(r) as i:
            data = i.read()
        os.waitpid(pid, 0)
        res = json.loads(data) if data else {"error": "child died"}
        res["ran"] = os.path.exists(sentinel) or os.path.exists(os.path.join(tmp, "ckpt-sentinel"))
        out[job["id"]] = res
        shutil.rmtree(tmp, ignore_errors=True)
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
