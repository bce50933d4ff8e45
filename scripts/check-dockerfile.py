#!/usr/bin/env python3
"""Checks the Dockerfile without docker (docker build needs a daemon; hadolint is not in Debian 12).

- every package an `apt-get install` names has a Debian 12 candidate (apt-cache policy);
- every COPY source exists in the build context and .dockerignore does not exclude it, and the
  context the build stage copies with `COPY .` keeps every path the CMake build reads;
- the build stage installs the Debian package of every dependency CMake found (--cache: a
  CMakeCache.txt), and the runtime stage installs the package of every shared library the built
  binary maps (--binary, by ldd and dpkg -S); libc6 comes with the image;
- the runtime stage copies the build stage's install prefix, and ENTRYPOINT is ckpt.
Run on a Debian 12 host with the build dependencies installed (scripts/deps.sh).
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

failures = []


def expect(what, ok):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)


def owner(path):
    for p in (path, os.path.realpath(path)):
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":")[0].strip()
    return None


def depends_closure(pkgs):
    """The packages and everything they depend on (Depends, Pre-Depends; alternatives: each that is
    installed here), as dpkg knows them on this machine: what apt-get install brings along."""
    seen, todo = set(), list(pkgs)
    while todo:
        p = todo.pop().split(":")[0]
        if p in seen:
            continue
        seen.add(p)
        r = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", p], capture_output=True, text=True)
        if r.returncode != 0:
            continue
        for dep in r.stdout.split(","):
            for alt in dep.split("|"):
                name = alt.strip().split(" ")[0].split(":")[0]
                if name:
                    todo.append(name)
    return seen


def stages(text):
    """[(name, [instructions])] with continuation lines joined and comments dropped."""
    lines = [l for l in text.splitlines() if not l.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    result = []
    for line in joined.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.upper().startswith("FROM "):
            m = re.match(r"FROM\s+(\S+)(?:\s+AS\s+(\S+))?", line, re.I)
            result.append((m.group(2) or m.group(1), m.group(1), []))
        else:
            result[-1][2].append(line)
    return result


def apt_packages(instructions):
    pkgs = []
    for ins in instructions:
        for cmd in re.split(r"&&|;", ins):
            words = cmd.split()
            if "apt-get" in words and "install" in words:
                pkgs += [w for w in words[words.index("install") + 1:] if not w.startswith("-")]
    return pkgs


def ignored(path, patterns):
    parts = path.strip("/").split("/")
    return any(fnmatch.fnmatch("/".join(parts[:i]), p.strip("/")) for p in patterns for i in range(1, len(parts) + 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    ap.add_argument("--cache", required=True, help="CMakeCache.txt of a build of ckpt")
    ap.add_argument("--binary", required=True, help="a built ckpt")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    text = open(os.path.join(root, "Dockerfile")).read()
    st = stages(text)
    expect("two stages: build, then runtime", len(st) == 2)
    (build_name, build_image, build), (_, run_image, runtime) = st[0], st[-1]
    expect("both stages are Debian 12", all(re.fullmatch(r"debian:(12|bookworm)(-slim)?", img) for _, img, _ in st))

    build_pkgs, run_pkgs = apt_packages(build), apt_packages(runtime)
    for p in sorted(set(build_pkgs + run_pkgs)):
        pol = subprocess.run(["apt-cache", "policy", p], capture_output=True, text=True).stdout
        cand = re.search(r"Candidate:\s*(\S+)", pol)
        expect(f"apt package {p} exists in Debian 12", cand is not None and cand.group(1) != "(none)")

    ignore_file = os.path.join(root, ".dockerignore")
    patterns = [l.strip() for l in open(ignore_file).read().splitlines()
                if l.strip() and not l.startswith("#")] if os.path.exists(ignore_file) else []
    needed = ["CMakeLists.txt", "cmake", "src", "man", "completions"] + (["schemas"] if os.path.isdir(os.path.join(root, "schemas")) else [])
    for ins in build + runtime:
        m = re.match(r"COPY\s+(.*)", ins, re.I)
        if not m or "--from" in ins:
            continue
        srcs = [w for w in m.group(1).split() if not w.startswith("--")][:-1]
        for s in srcs:
            expect(f"COPY source {s} exists", os.path.exists(os.path.join(root, s)))
            expect(f"COPY source {s} is not in .dockerignore", s in (".", "./") or not ignored(s, patterns))
            if s in (".", "./"):
                for n in needed:
                    expect(f"{n} reaches the image (not in .dockerignore)", not ignored(n, patterns))

    # The build stage has the -dev package of everything CMake found.
    cache = open(args.cache).read()
    for var in ("fmt_DIR", "nlohmann_json_DIR", "CLI11_DIR", "ZLIB_INCLUDE_DIR", "LIBDEFLATE_INCLUDE_DIR", "CURL_INCLUDE_DIR"):
        m = re.search(rf"^{var}:\w+=(.*)$", cache, re.M)
        if not m:
            continue
        path = m.group(1)
        target = path if var.endswith("INCLUDE_DIR") else next(
            (os.path.join(path, f) for f in sorted(os.listdir(path)) if f.endswith(".cmake")), path)
        if var == "ZLIB_INCLUDE_DIR":
            target = os.path.join(path, "zlib.h")
        if var == "LIBDEFLATE_INCLUDE_DIR":
            target = os.path.join(path, "libdeflate.h")
        if var == "CURL_INCLUDE_DIR":
            target = os.path.join(path, "curl", "curl.h")
        pkg = owner(target)
        expect(f"build stage installs {pkg} (for {var}={path})", pkg in build_pkgs)
    for tool in ("g++", "cmake", "make"):
        expect(f"build stage installs {tool}", tool in build_pkgs)

    # The runtime stage has the package of every shared library the binary maps, named or brought along
    # as a dependency of one that is named.
    run_closure = depends_closure(run_pkgs)
    for line in subprocess.run(["ldd", args.binary], capture_output=True, text=True, check=True).stdout.splitlines():
        m = re.search(r"=>\s+(/\S+)", line)
        if m:
            pkg = owner(m.group(1))
            expect(f"runtime stage installs {pkg} (for {m.group(1)})", pkg == "libc6" or pkg in run_closure)

    run_text = "\n".join(runtime)
    dest = re.search(r"DESTDIR=(\S+)\s+cmake --install \S+ --prefix (\S+)", "\n".join(build))
    expect("the build stage installs with DESTDIR and --prefix", dest is not None)
    if dest:
        copied = re.search(rf"COPY --from={re.escape(build_name)} (\S+)", run_text)
        expect("the runtime stage copies the build stage's install tree",
               copied is not None and copied.group(1).rstrip("/") == (dest.group(1) + dest.group(2)).rstrip("/"))
    expect('ENTRYPOINT ["ckpt"]', re.search(r'^ENTRYPOINT \["ckpt"\]', run_text, re.M) is not None)
    if failures:
        sys.exit(f"Dockerfile: {len(failures)} check(s) failed")
    print(f"Dockerfile: {len(set(build_pkgs + run_pkgs))} apt packages exist in Debian 12; build and runtime stages cover ckpt's dependencies")


if __name__ == "__main__":
    main()
