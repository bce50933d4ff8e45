#!/usr/bin/env python3
"""The CUDA build of ckpt-torch, checked on a machine without a GPU (issue 39, point 4).

PyPI's torch is a CUDA build, so the truth environment (scripts/truth-env.sh: build-venv/truth/) brings a
CUDA LibTorch and its CMake package. This test configures ckpt in its own build directory against it, as
the README's install section says for any LibTorch 2.x (CMAKE_PREFIX_PATH=torch.utils.cmake_prefix_path),
and checks:

  1. CMake finds the wheel's libtorch (not a system one) and reports "LibTorch has CUDA: the streaming CUDA load is built" (CKPT_CUDA=1: src/torch's CUDA
     sink is compiled), and `ckpt` and `ckpt-torch` build (nvcc and the CUDA headers come from the machine's
     CUDA toolkit and torch's wheels: a change that breaks the GPU build fails here);
  2. ckpt-torch links that LibTorch's CUDA library (libtorch_cuda.so is mapped: `ldd`);
  3. `ckpt load --device cuda FILE` on this GPU-less machine exits 4 (environment) with exactly one
     stderr line `ckpt: error: --device cuda: CUDA is not available: LibTorch 2.15.0 has CUDA but no
     CUDA device is visible (...)` naming the LibTorch version the truth environment has; and `ckpt load
     --device cpu FILE` through the same binary loads the file (exit 0), so the binary works apart from
     the device;
  4. the GPU test's CPU twin (tests/cli/cuda_load.py --device cpu: the streaming load through the host
     sink) with this LibTorch 2.15, which has the float8 and uint dtypes LibTorch 1.13 lacks: their NaN /
     Inf counted by LibTorch's reductions equal torch's too.

Exit 77 (ctest: skipped) where the truth environment is absent or incomplete (a fresh CI clone does not
pay for a 6 GB download), or its torch has no CUDA. Each phase's wall time is printed.

    cuda_build_test.py --root SRC --work DIR [--python PY]   (ctest: --work build-cuda/ at the checkout's root)
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

SKIP = 77


def run(cmd, **kw):
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    print(f"[{time.monotonic() - t:6.1f} s] {' '.join(cmd[:6])}{' ...' if len(cmd) > 6 else ''} -> {p.returncode}", flush=True)
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--python", help="the truth environment's python (default: scripts/truth-env.sh --print)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    py = a.python
    if not py:
        p = subprocess.run([os.path.join(root, "scripts", "truth-env.sh"), "--print"], capture_output=True, text=True)
        if p.returncode != 0:
            print("skipped: no truth environment (scripts/truth-env.sh makes build-venv/truth)")
            return SKIP
        py = p.stdout.strip()
    p = subprocess.run([py, "-c", "import os, torch, torch.utils; print(torch.__version__); print(torch.version.cuda or ''); "
                        "print(torch.utils.cmake_prefix_path); print(os.path.dirname(torch.__file__))"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"skipped: {py} cannot import torch: {p.stderr.strip().splitlines()[-1:]}")
        return SKIP
    version, cuda, prefix, torch_dir = p.stdout.strip().splitlines()
    if not cuda:
        print(f"skipped: torch {version} in {py} has no CUDA")
        return SKIP
    short = version.split("+")[0]
    print(f"torch {version} (CUDA {cuda}) from {prefix}")
    failures = []

    def expect(what, ok, detail=""):
        print(("ok   " if ok else "FAIL ") + what + ("" if ok or not detail else "\n" + detail), flush=True)
        if not ok:
            failures.append(what)
        return ok

    build = os.path.abspath(a.work)
    # CMAKE_PREFIX_PATH names the wheel's torch/ too, so that its lib/ is searched before the system's: a
    # machine with Debian's libtorch-dev would otherwise pair 2.15's headers with 1.13's libtorch.so (the
    # top-level CMakeLists.txt refuses that mix). TORCH_CUDA_ARCH_LIST: torch's CMake would otherwise
    # try_run a CUDA program to find the GPUs, which CMake 3.25 cannot configure for nvcc 13 (and there is
    # no GPU); ckpt compiles no kernels, so the list only names the H200's sm_90 for torch's flags.
    # Default build type and ccache (as scripts/test.sh sets it up; build-cuda/ sits at build/'s depth, so
    # ckpt_core's objects come from the cache and only the LibTorch sources compile).
    # The wheel's CUDA libraries (site-packages/nvidia/*/lib: NCCL, cuDNN, cuBLAS, ... of CUDA 13.2) come before
    # the machine's toolkit (/usr/local/cuda/lib, CUDA 13.0, whose older libnccl.so.2 lacks symbols
    # libtorch_cuda.so needs), which torch's CMake puts in the rpath for libcudart: at link time
    # (-rpath-link, searched first) and at run time (an -rpath given first comes first in the binary's).
    nvidia = sorted(glob.glob(os.path.join(os.path.dirname(torch_dir), "nvidia", "*", "lib")))
    cmd = ["cmake", "-S", root, "-B", build, "-DCKPT_BUILD_TESTS=OFF", f"-DCMAKE_PREFIX_PATH={prefix};{torch_dir}",
           "-DTORCH_CUDA_ARCH_LIST=9.0"]
    if nvidia:
        cmd.append(f"-DCMAKE_EXE_LINKER_FLAGS=-Wl,-rpath-link,{':'.join(nvidia)} -Wl,-rpath,{':'.join(nvidia)}")
    env = dict(os.environ)
    if shutil.which("ccache"):
        cmd.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        env.setdefault("CCACHE_BASEDIR", root)
        env.setdefault("CCACHE_NOHASHDIR", "1")
    p = run(cmd, env=env)
    out = p.stdout + p.stderr
    if not expect("cmake configures against the CUDA LibTorch", p.returncode == 0, out[-4000:]):
        return 1
    # the library CMake found, from its cache (the "Found Torch" line is printed on the first configure only)
    m = re.search(r"^TORCH_LIBRARY:FILEPATH=(.+)$", open(os.path.join(build, "CMakeCache.txt")).read(), re.M)
    expect(f"cmake: the wheel's libtorch ({m.group(1) if m else 'not found'})",
           bool(m) and os.path.realpath(m.group(1)).startswith(os.path.realpath(torch_dir) + os.sep), out[-4000:])
    expect("cmake: LibTorch has CUDA: the streaming CUDA load is built",
           "LibTorch has CUDA: the streaming CUDA load is built" in out, out[-4000:])
    p = run(["cmake", "--build", build, f"-j{a.jobs}", "--target", "ckpt", "ckpt-torch"], env=env)
    if not expect("ckpt and ckpt-torch build with CKPT_CUDA=1", p.returncode == 0, (p.stdout + p.stderr)[-6000:]):
        return 1
    ckpt, torch_bin = os.path.join(build, "ckpt"), os.path.join(build, "ckpt-torch")
    flags = open(os.path.join(build, "CMakeFiles", "ckpt_torch.dir", "flags.make")).read() \
        if os.path.exists(os.path.join(build, "CMakeFiles", "ckpt_torch.dir", "flags.make")) else ""
    expect("src/torch is compiled with CKPT_CUDA=1", "-DCKPT_CUDA=1" in flags, flags[-2000:])
    p = run(["ldd", torch_bin])
    expect("ckpt-torch links libtorch_cuda.so", "libtorch_cuda.so" in p.stdout, p.stdout[-3000:])

    fixture = os.path.join(root, "testdata", "t113", "plain_state_dict.pt")
    p = run([ckpt, "load", "--device", "cuda", fixture])
    lines = p.stderr.strip().splitlines()
    want = re.compile(rf"ckpt: error: --device cuda: CUDA is not available: LibTorch {re.escape(short)}\S* has CUDA but no "
                      r"CUDA device is visible \(driver, CUDA_VISIBLE_DEVICES\)")
    expect(f"load --device cuda without a GPU: exit 4 (got {p.returncode})", p.returncode == 4, p.stderr[-2000:])
    expect("load --device cuda without a GPU: one stderr line naming the CUDA LibTorch",
           len(lines) == 1 and bool(want.fullmatch(lines[0])) if lines else False, p.stderr[-2000:])
    expect("load --device cuda without a GPU: nothing on stdout", p.stdout == "", p.stdout[-2000:])
    p = run([ckpt, "load", "--device", "cpu", fixture])
    expect(f"load --device cpu through the CUDA build: exit 0 (got {p.returncode})", p.returncode == 0, p.stderr[-2000:])
    p = run([sys.executable, os.path.join(root, "tests", "cli", "cuda_load.py"), "--ckpt", ckpt, "--root", root,
             "--device", "cpu", "--work", os.path.join(a.work, "cuda_load")], timeout=900)
    expect("the CPU twin of the cuda test with LibTorch " + version, p.returncode == 0, (p.stdout + p.stderr)[-3000:])
    print(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "")
    print(f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
