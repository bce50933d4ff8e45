#!/usr/bin/env python3
"""Builds the Debian packages with CPack and checks them with dpkg-deb; runs the manual's examples
against an installed copy.

  build     cpack -G DEB in --work (a ctest fixture for the two checks below)
  ckpt      ckpt_*.deb: its Depends name the Debian package of every shared library the built ckpt
            maps (found here with ldd and dpkg -S, not with dpkg-shlibdeps) and none of LibTorch; it
            holds the stripped binary, every manual page of man/pages.txt, the example files of
            man/examples.txt, the three completions and the schemas; the binary runs, and so does
            every example of the manual pages, from the package's files (see `examples`)
  torch     ckpt-torch_*.deb: depends on ckpt (the same version) and on the package of LibTorch's
            library; stripped; holds none of ckpt's files. Exit 77 (ctest: skipped) when the build
            has no ckpt-torch.
  examples  `cmake --install` of the build into --work/stage (ckpt-torch too when built), then every
            example command of the installed manual pages (the `.\" console` blocks that
            man/md2man.py marks) is run with bash from PREFIX/share/ckpt, the installed ckpt first on
            PATH, and must print what the page shows (stdout and stderr, the `...` and `[..]`
            wildcards of docs/writing-docs.md; an "exit status N" line where the page shows one).
            Blocks marked ckpt-torch are skipped without ckpt-torch, and cuda ones without a GPU.
"""
import argparse
import difflib
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


def man_pages(root):
    """(name, section) of each page of man/pages.txt."""
    out = subprocess.run([sys.executable, os.path.join(root, "man", "md2man.py"), "--pages",
                          os.path.join(root, "man", "pages.txt"), "--list"], capture_output=True, text=True, check=True)
    return [tuple(l.split()) for l in out.stdout.splitlines() if l.strip()]


def example_files(root):
    """The installed paths (relative to PREFIX/share/ckpt/examples) of man/examples.txt's files."""
    out = []
    for line in open(os.path.join(root, "man", "examples.txt"), encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        rel = re.sub(r"^(testdata|tests/cli/data)/", "", line)
        src = os.path.join(root, line)
        if os.path.isdir(src):
            out += [os.path.join(rel, os.path.relpath(os.path.join(d, f), src))
                    for d, _, fs in os.walk(src) for f in fs]
        else:
            out.append(rel)
    return out


def roff_text(line):
    """A line of an .nf block as the terminal shows it."""
    line = re.sub(r"\\\[u([0-9A-F]{4,5})\]", lambda m: chr(int(m.group(1), 16)), line)
    if line.startswith("\\&"):
        line = line[2:]
    return line.replace("\\-", "-").replace("\\e", "\\")


def page_examples(text):
    """(markers, lines) of each console block of a generated page, unescaped."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r'^\.\\" console(.*)$', line)
        if not m:
            continue
        j = lines.index(".nf", i) + 1
        body = []
        while lines[j] != ".fi":
            body.append(roff_text(lines[j]))
            j += 1
        yield set(m.group(1).split()), body


def unfold(body):
    """(command, expected lines) of a console block whose lines the page folded: a command goes on
    over lines ending in \\ (as the shell reads it); so does an output line, whose rest then joins it
    without its leading spaces. A rule cut to the page's width matches a longer one."""
    out = []
    i = 0
    while i < len(body):
        line = body[i]
        while line.endswith("\\") and i + 1 < len(body):
            i += 1
            line = line[:-1] + body[i].lstrip()
        i += 1
        if line.startswith("$ "):
            out.append([line[2:], []])
        elif out:
            if re.fullmatch(r"([-=_~\u2500\u2501])\1{7,}", line.strip()):
                line += "[..]"
            out[-1][1].append(line)
    return out


def run_examples(prefix, root, torch):
    """Runs every example of the installed manual pages under PREFIX (docstring: `examples`)."""
    sys.path.insert(0, os.path.join(root, "tests", "docs"))
    import doc_examples
    share = os.path.join(prefix, "share", "ckpt")
    env = dict(os.environ, PATH=os.path.join(prefix, "bin") + os.pathsep + os.environ.get("PATH", ""),
               LC_ALL="C.UTF-8")
    for k in ("NO_COLOR", "CKPT_TORCH", "CKPT_PRECHECK_FD"):
        env.pop(k, None)
    cuda = torch and doc_examples.has_cuda(os.path.join(prefix, "bin", "ckpt-torch"))
    ran = skipped = 0
    for name, section in man_pages(root):
        path = os.path.join(prefix, "share", "man", f"man{section}", f"{name}.{section}.gz")
        if not os.path.exists(path):
            continue  # check_ckpt reports a missing page
        with gzip.open(path, "rt", encoding="utf-8") as f:
            text = f.read()
        for markers, body in page_examples(text):
            for cmd, expected in unfold(body):
                if ("ckpt-torch" in markers and not torch) or ("cuda" in markers and not cuda):
                    skipped += 1
                    continue
                ran += 1
                r = subprocess.run(["bash", "-c", cmd], cwd=share, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, timeout=300)
                want = doc_examples.trim(expected)
                got = doc_examples.trim(r.stdout.decode("utf-8", "replace").split("\n"))
                expect(f"{name}({section}): $ {cmd}", doc_examples.matches(want, got),
                       "\n".join(difflib.unified_diff(want, got, "the page", "installed", lineterm="")))
    expect("the manual pages have examples that ran", ran > 0)
    print(f"manual examples from {prefix}: {ran} run, {skipped} skipped (need ckpt-torch or CUDA)")


def check_installed_files(prefix, root, files, where):
    """The manual pages and the example files, as FILES (paths relative to PREFIX) should hold them."""
    for name, section in man_pages(root):
        expect(f"{where} holds share/man/man{section}/{name}.{section}.gz",
               f"share/man/man{section}/{name}.{section}.gz" in files)
    for rel in example_files(root):
        expect(f"{where} holds share/ckpt/examples/{rel}", f"share/ckpt/examples/{rel}" in files)


def check_ckpt(args, tmp):
    path = deb(args.work, "ckpt")
    expect("Package: ckpt", out("dpkg-deb", "-f", path, "Package").strip() == "ckpt")
    names, field = depends(path)
    expect("ckpt's Depends name no LibTorch", not any("torch" in n for n in names), field)
    for lib, pkg in library_packages(args.ckpt).items():
        expect(f"ckpt's Depends include {pkg} (for {lib})", pkg in names, field)
    files = set(re.findall(r"\s\./(\S+)$", out("dpkg-deb", "-c", path), re.M))
    want = ["usr/bin/ckpt", "usr/share/bash-completion/completions/ckpt",
            "usr/share/zsh/vendor-completions/_ckpt", "usr/share/fish/vendor_completions.d/ckpt.fish"]
    schemas = os.path.join(args.root, "schemas")
    if os.path.isdir(schemas):
        want += [f"usr/share/ckpt/schemas/{os.path.relpath(os.path.join(d, f), schemas)}"
                 for d, _, fs in os.walk(schemas) for f in fs]
    for f in want:
        expect(f"ckpt's package holds /{f}", f in files)
    check_installed_files("usr", args.root, {f[4:] for f in files if f.startswith("usr/")}, "ckpt's package")
    expect("ckpt's package holds no ckpt-torch", "usr/bin/ckpt-torch" not in files)
    root = extract(path, tmp)
    check_stripped(root, "usr/bin/ckpt")
    for name, section in man_pages(args.root):
        page = os.path.join(root, f"usr/share/man/man{section}/{name}.{section}.gz")
        if not os.path.exists(page):
            continue  # reported above
        with open(page, "rb") as f:
            gz = f.read()
        # Debian policy 12.1: gzip -9n, so no file name (FLG.FNAME) and no time (MTIME 0) in the header
        expect(f"{name}.{section}.gz is compressed like gzip -9n",
               gz[:2] == b"\x1f\x8b" and not gz[3] & 0x08 and gz[4:8] == b"\0\0\0\0")
        th = f"\n.TH {name.upper()} {section} ".encode()
        expect(f"{name}.{section}.gz is roff ({th.strip().decode()})", th in gzip.decompress(gz)[:4096])
    version = out("dpkg-deb", "-f", path, "Version").strip()
    ran = subprocess.run([os.path.join(root, "usr/bin/ckpt"), "--version"], capture_output=True, text=True)
    expect(f"the packaged ckpt runs and says {version}", ran.returncode == 0 and version in ran.stdout, ran.stdout + ran.stderr)
    run_examples(os.path.join(root, "usr"), args.root, torch=False)
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


def check_examples(args):
    stage = os.path.join(args.work, "stage")
    shutil.rmtree(stage, ignore_errors=True)
    for component in ["ckpt"] + (["torch"] if args.torch else []):
        p = subprocess.run(["cmake", "--install", args.build, "--prefix", stage, "--component", component],
                           capture_output=True, text=True)
        if p.returncode != 0:
            sys.exit(f"cmake --install --component {component} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    files = {os.path.relpath(os.path.join(d, f), stage) for d, _, fs in os.walk(stage) for f in fs}
    check_installed_files(stage, args.root, files, "the install")
    run_examples(stage, args.root, torch=bool(args.torch))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("step", choices=["build", "ckpt", "torch", "examples"])
    ap.add_argument("--build", required=True, help="the CMake build directory (CPackConfig.cmake)")
    ap.add_argument("--work", required=True, help="where cpack writes the packages")
    ap.add_argument("--root", required=True, help="the source tree")
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--torch", default="", help="the built ckpt-torch, empty when there is none")
    args = ap.parse_args()
    if args.step == "examples":
        check_examples(args)
        if failures:
            sys.exit(f"{len(failures)} check(s) failed")
        print("examples: the installed manual's examples run as documented")
        return
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
