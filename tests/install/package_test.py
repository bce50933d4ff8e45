#!/usr/bin/env python3
"""Builds the Debian packages with CPack and checks them with dpkg-deb.

  build  cpack -G DEB in --work (a ctest fixture for the two checks below)
  ckpt   ckpt_*.deb: its Depends name the Debian package of every shared library the built ckpt maps
         (found here with ldd and dpkg -S, not with dpkg-shlibdeps) and none of LibTorch; it holds
         the stripped binary, the man page, the three completions and the schemas; the binary runs
  torch  ckpt-torch_*.deb: depends on ckpt (the same version) and on the package of LibTorch's
         library; stripped; holds none of ckpt's files. Exit 77 (ctest: skipped) when the build has
         no ckpt-torch.
"""
import argparse
import glob
import os
import re
import shutil
import gzip
import subprocess
import sys
import tempfile

SKIP = 77
failures = []


def expect(what, ok, detail=""):
    if not ok:
        failures.append(what)
        print(f"FAIL: {what}" + (f"\n{detail}" if detail else ""), file=sys.stderr)


def out(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def deb(work, name):
    found = glob.glob(os.path.join(work, f"{name}_*.deb"))
    if len(found) != 1:
        sys.exit(f"expected one {name}_*.deb in {work} (from the `build` step), found {found}")
    return found[0]


def depends(path):
    """Package names in Depends, and the raw field."""
    field = out("dpkg-deb", "-f", path, "Depends").strip()
    names = {re.split(r"[\s(:]", alt.strip())[0] for part in field.split(",") for alt in part.split("|")}
    return {n for n in names if n}, field


def library_packages(binary):
    """The Debian package of each shared library BINARY needs directly (its DT_NEEDED entries, as
    dpkg-shlibdeps reads them; the libraries those need are their packages' Depends), found where ldd
    resolves it (dpkg -S on its real path)."""
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out("readelf", "-d", "-W", binary)))
    packages = {}
    for line in out("ldd", binary).splitlines():
        m = re.search(r"^\s*(\S+)\s+=>\s+(/\S+)", line)
        if not m or m.group(1) not in needed:
            continue
        lib = m.group(2)
        for path in (lib, os.path.realpath(lib)):
            owner = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
            if owner.returncode == 0:
                packages[os.path.basename(lib)] = owner.stdout.split(":")[0].strip()
                break
        else:
            expect(f"{os.path.basename(binary)}: {lib} belongs to no Debian package", False)
    return packages


def check_stripped(root, rel):
    path = os.path.join(root, rel)
    desc = out("file", "-b", path)
    expect(f"{rel} is stripped (file: {desc.strip()})", ", stripped" in desc)
    sections = out("readelf", "-S", "-W", path)
    expect(f"{rel} has no .debug sections", ".debug_" not in sections)


def extract(path, tmp):
    root = os.path.join(tmp, os.path.basename(path))
    subprocess.run(["dpkg-deb", "-x", path, root], check=True)
    return root


def check_ckpt(args, tmp):
    path = deb(args.work, "ckpt")
    expect("Package: ckpt", out("dpkg-deb", "-f", path, "Package").strip() == "ckpt")
    names, field = depends(path)
    expect("ckpt's Depends name no LibTorch", not any("torch" in n for n in names), field)
    for lib, pkg in library_packages(args.ckpt).items():
        expect(f"ckpt's Depends include {pkg} (for {lib})", pkg in names, field)
    files = set(re.findall(r"\s\./(\S+)$", out("dpkg-deb", "-c", path), re.M))
    want = ["usr/bin/ckpt", "usr/share/man/man1/ckpt.1.gz", "usr/share/bash-completion/completions/ckpt",
            "usr/share/zsh/vendor-completions/_ckpt", "usr/share/fish/vendor_completions.d/ckpt.fish"]
    schemas = os.path.join(args.root, "schemas")
    if os.path.isdir(schemas):
        want += [f"usr/share/ckpt/schemas/{os.path.relpath(os.path.join(d, f), schemas)}"
                 for d, _, fs in os.walk(schemas) for f in fs]
    for f in want:
        expect(f"ckpt's package holds /{f}", f in files)
    expect("ckpt's package holds no ckpt-torch", "usr/bin/ckpt-torch" not in files)
    root = extract(path, tmp)
    check_stripped(root, "usr/bin/ckpt")
    with open(os.path.join(root, "usr/share/man/man1/ckpt.1.gz"), "rb") as f:
        gz = f.read()
    # Debian policy 12.1: gzip -9n, so no file name (FLG.FNAME) and no time (MTIME 0) in the header
    expect("the man page is compressed like gzip -9n", gz[:2] == b"\x1f\x8b" and not gz[3] & 0x08 and gz[4:8] == b"\0\0\0\0")
    expect("the man page is roff", gzip.decompress(gz).startswith(b".TH CKPT 1") or b"\n.TH " in gzip.decompress(gz)[:4096])
    version = out("dpkg-deb", "-f", path, "Version").strip()
    ran = subprocess.run([os.path.join(root, "usr/bin/ckpt"), "--version"], capture_output=True, text=True)
    expect(f"the packaged ckpt runs and says {version}", ran.returncode == 0 and version in ran.stdout, ran.stdout + ran.stderr)
    print(f"ckpt: Depends: {field}")


def check_torch(args, tmp):
    if not args.torch:
        print("ckpt-torch is not built (-DCKPT_WITH_TORCH=OFF): its package is not checked")
        sys.exit(SKIP)
    path = deb(args.work, "ckpt-torch")
    expect("Package: ckpt-torch", out("dpkg-deb", "-f", path, "Package").strip() == "ckpt-torch")
    names, field = depends(path)
    version = out("dpkg-deb", "-f", path, "Version").strip()
    expect(f"ckpt-torch depends on ckpt (= {version})", re.search(rf"\bckpt \(= {re.escape(version)}\)", field), field)
    libs = library_packages(args.torch)
    torch_pkgs = {pkg for lib, pkg in libs.items() if lib.startswith(("libtorch", "libc10"))}
    expect("ckpt-torch maps a LibTorch that belongs to a Debian package", torch_pkgs, str(libs))
    for lib, pkg in libs.items():
        expect(f"ckpt-torch's Depends include {pkg} (for {lib})", pkg in names, field)
    files = set(re.findall(r"\s\./(\S+)$", out("dpkg-deb", "-c", path), re.M))
    regular = {f for f in files if not f.endswith("/")}
    expect("ckpt-torch's package holds /usr/bin/ckpt-torch and nothing of ckpt's", regular == {"usr/bin/ckpt-torch"},
           str(sorted(regular)))
    check_stripped(extract(path, tmp), "usr/bin/ckpt-torch")
    print(f"ckpt-torch: Depends: {field}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["build", "ckpt", "torch"])
    ap.add_argument("--build", required=True, help="the CMake build directory (CPackConfig.cmake)")
    ap.add_argument("--work", required=True, help="where cpack writes the packages")
    ap.add_argument("--root", required=True, help="the source tree")
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--torch", default="", help="the built ckpt-torch, empty when there is none")
    args = ap.parse_args()
    for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps", "file", "readelf", "ldd"):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed (scripts/deps.sh installs it)")
    if args.step == "build":
        shutil.rmtree(args.work, ignore_errors=True)
        os.makedirs(args.work)
        p = subprocess.run(["cpack", "-G", "DEB", "-B", args.work, "--config",
                            os.path.join(args.build, "CPackConfig.cmake")], capture_output=True, text=True)
        print(p.stdout[-4000:], p.stderr[-4000:])
        sys.exit(p.returncode)
    with tempfile.TemporaryDirectory() as tmp:
        (check_ckpt if args.step == "ckpt" else check_torch)(args, tmp)
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print(f"{args.step}: package checks passed")


if __name__ == "__main__":
    main()
