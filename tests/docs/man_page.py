#!/usr/bin/env python3
"""Checks the generated manual pages (man/pages.txt: ckpt(1), a page per command and per topic).

For every page of man/pages.txt, in --dir:
  - `man --warnings -l` prints no warning at MANWIDTH 80 and 120 (man-db runs preconv, tbl and
    groff -ww; any message on stderr fails);
  - no line is wider than 80 columns at MANWIDTH=80, in a UTF-8 locale and in the C locale (where
    groff writes ASCII stand-ins such as -- for an em dash);
  - it has its sections in order: NAME first, SEE ALSO last, the usual ones of ckpt(1)
    (REQUIRED) and a SYNOPSIS and DESCRIPTION on each command's page;
  - each heading of the docs it is made of appears in its formatted text, so a part dropped by the
    generator fails;
  - its references name(N) to ckpt's pages name pages that exist, and each page but ckpt(1) names
    ckpt(1) and is named in ckpt(1)'s SEE ALSO.
And for the manual as a whole: every docs/*.md is in it (or left out on purpose in pages.txt's `-`
line), every part of it (the text before its first ## section and each ## section); ckpt(1), the
summary page, stays under MAX_SUMMARY_LINES lines; every example file the pages name
(examples-used.txt, written by md2man.py --examples-used) is installed by man/examples.txt, every
line there is named by an example, and together they stay under MAX_EXAMPLES_BYTES.

  man_page.py --dir build/man --root DIR
"""
import argparse
import os
import re
import subprocess
import sys

REQUIRED = ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES",
            "SEE ALSO"]
WIDTH = 80
MAX_SUMMARY_LINES = 600
# The example files ship in the package: an example that needs a big file shows one of the small ones.
MAX_EXAMPLES_BYTES = 4 << 20

failures = []


def fail(msg):
    failures.append(msg)


def formatted(page, width, locale, warnings=True):
    env = dict(os.environ, MANWIDTH=str(width), LC_ALL=locale, MAN_KEEP_FORMATTING="")
    env.pop("MANPAGER", None)
    env.pop("MANOPT", None)
    r = subprocess.run(["man"] + (["--warnings"] if warnings else []) + ["-l", page], env=env,
                       capture_output=True)
    text = re.sub(r".\x08", "", r.stdout.decode("utf-8", "replace"))
    return r.returncode, r.stderr.decode("utf-8", "replace"), text


def docs_outline(path):
    """(intro has text, [(level, title) of each heading]) of a docs page, outside code blocks."""
    heads, intro, fence = [], False, None
    for line in open(path, encoding="utf-8"):
        m = re.match(r"^\s*(`{3,})", line)
        if m and (fence is None or line.strip() == fence):
            fence = None if fence else m.group(1)
            if not any(level == 2 for level, _ in heads):
                intro = True
            continue
        h = not fence and re.match(r"^(#{1,6}) (.*)$", line)
        if h:
            heads.append((len(h.group(1)), h.group(2)))
        elif line.strip() and not any(level == 2 for level, _ in heads):
            intro = True
    return intro, heads


def plain(title):
    return re.sub(r"\s+", " ", re.sub(r"[`*]|\[|\]\([^)]*\)", "", title)).strip()


def check_page(md2man, args, page, names):
    name, section = page["name"], page["section"]
    path = os.path.join(args.dir, f"{name}.{section}")
    label = f"{name}({section})"
    if not os.path.exists(path):
        fail(f"{label}: no {path}")
        return 0
    text = ""
    for width in (WIDTH, 120):
        rc, err, out = formatted(path, width, "C.UTF-8")
        if rc != 0 or err.strip():
            fail(f"{label}: man --warnings -l (MANWIDTH={width}) exit {rc}:\n{err}")
        if width == WIDTH:
            text = out
    for locale in ("C.UTF-8", "C"):
        _, _, out = formatted(path, WIDTH, locale, warnings=False)
        for n, line in enumerate(out.split("\n"), 1):
            if len(line) > WIDTH:
                fail(f"{label}: line {n} is {len(line)} columns wide at MANWIDTH={WIDTH} (LC_ALL={locale}): {line.strip()[:60]}")
    sections = [l for l in text.split("\n") if re.match(r"^[A-Z][A-Z ]+$", l)]
    want = REQUIRED if (name, section) == ("ckpt", "1") else \
        ["NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"] if section == "1" else ["NAME", "SEE ALSO"]
    at = -1
    for s in want:
        if s not in sections:
            fail(f"{label}: no section {s}")
        elif sections.index(s) < at:
            fail(f"{label}: section {s} out of order")
        else:
            at = sections.index(s)
    if sections and (sections[0] != "NAME" or sections[-1] != "SEE ALSO"):
        fail(f"{label}: the sections are {sections}: NAME comes first and SEE ALSO last")
    flat = re.sub(r"\s+", " ", text).upper()
    for title, source, part, _ in page["entries"]:
        m = re.match(r"^(\S+\.md)(?:#(\S+))?$", source)
        if not m or part in ("lead", "intro"):
            continue
        _, heads = docs_outline(os.path.join(args.root, m.group(1)))
        inside = m.group(2) is None
        for level, h in heads:
            if m.group(2):
                if level <= 2:
                    inside = md2man.slug(h) == m.group(2)
                    continue
            if inside and level >= 2 and plain(h).upper() not in flat:
                fail(f"{label}: heading '{plain(h)}' of {m.group(1)} is not in the page")
    # A name may be broken after its hyphen at the end of a line.
    joined = re.sub(r"\b(ckpt(?:-[a-z]+)*-)\n\s*", r"\1", text)
    refs = set(re.findall(r"\b(ckpt(?:-[a-z]+)*)\((\d)\)", re.sub(r"\s+", " ", joined)))
    for ref in sorted(refs - names):
        fail(f"{label}: names {ref[0]}({ref[1]}), which is no page of the manual")
    see_also = joined.split("\nSEE ALSO\n")[-1] if "\nSEE ALSO\n" in joined else ""
    see = set(re.findall(r"\b(ckpt(?:-[a-z]+)*)\((\d)\)", re.sub(r"\s+", " ", see_also)))
    if (name, section) == ("ckpt", "1"):
        for other in sorted(names - {("ckpt", "1")} - see):
            fail(f"ckpt(1): SEE ALSO does not name {other[0]}({other[1]})")
    elif ("ckpt", "1") not in see:
        fail(f"{label}: SEE ALSO does not name ckpt(1)")
    return len(text.rstrip("\n").split("\n"))


def check_coverage(md2man, args, pages, left_out):
    """Every docs page, and every part of it, is in some manual page."""
    covered = {}  # docs file -> set of parts: "all", "intro", "lead", "body", or a ## anchor
    for p in pages:
        for _, source, part, _ in p["entries"]:
            m = re.match(r"^(\S+\.md)(?:#(\S+))?$", source)
            if m:
                covered.setdefault(m.group(1), set()).add(m.group(2) or part or "all")
    for f in left_out:
        if not os.path.exists(os.path.join(args.root, f)):
            fail(f"man/pages.txt leaves out {f}, which does not exist")
    for f in sorted(os.listdir(os.path.join(args.root, "docs"))):
        rel = f"docs/{f}"
        if not f.endswith(".md") or rel in left_out:
            continue
        parts = covered.get(rel)
        if not parts:
            fail(f"{rel} is in no manual page: give it a line in man/pages.txt (or leave it out there)")
            continue
        if "all" in parts or {"lead", "body"} <= parts:
            continue
        intro, heads = docs_outline(os.path.join(args.root, rel))
        if intro and not parts & {"intro", "body"}:
            fail(f"{rel}: the text before its first ## section is in no manual page")
        for level, h in heads:
            if level == 2 and "body" not in parts and md2man.slug(h) not in parts:
                fail(f"{rel}: its section '## {h}' is in no manual page")


def check_examples(args):
    used_path = os.path.join(args.dir, "examples-used.txt")
    if not os.path.exists(used_path):
        fail(f"no {used_path} (md2man.py --examples-used)")
        return
    used = [l.strip() for l in open(used_path, encoding="utf-8") if l.strip()]
    listed = [l.strip().rstrip("/") for l in open(os.path.join(args.root, "man", "examples.txt"), encoding="utf-8")
              if l.strip() and not l.startswith("#")]
    for u in used:
        if not any(u == l or u.startswith(l + "/") for l in listed):
            fail(f"an example names {u}, which man/examples.txt does not install: add it there")
    installed = {}
    size = sum(os.path.getsize(os.path.join(d, f)) for l in listed
               for d, _, fs in (os.walk(os.path.join(args.root, l)) if os.path.isdir(os.path.join(args.root, l))
                                else [(args.root, [], [l] if os.path.exists(os.path.join(args.root, l)) else [])])
               for f in fs)
    print(f"man/examples.txt: {len(listed)} files and folders, {size} bytes")
    if size > MAX_EXAMPLES_BYTES:
        fail(f"man/examples.txt installs {size} bytes, over {MAX_EXAMPLES_BYTES}: show the examples on smaller files")
    for l in listed:
        if not any(u == l or u.startswith(l + "/") for u in used):
            fail(f"man/examples.txt installs {l}, which no example names")
        if not os.path.exists(os.path.join(args.root, l)):
            fail(f"man/examples.txt: no such file or folder {l}")
        dest = re.sub(r"^(testdata|tests/cli/data)/", "", l)
        if dest in installed:
            fail(f"man/examples.txt: {l} and {installed[dest]} are both installed as examples/{dest}")
        installed[dest] = l


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="where the build wrote the pages (build/man)")
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.root, "man"))
    import md2man
    pages, left_out = md2man.read_pages(os.path.join(args.root, "man", "pages.txt"))
    names = {(p["name"], p["section"]) for p in pages}
    summary = 0
    for p in pages:
        n = check_page(md2man, args, p, names)
        print(f"{p['name']}({p['section']}): {n} lines at MANWIDTH={WIDTH}")
        if (p["name"], p["section"]) == ("ckpt", "1"):
            summary = n
    if summary > MAX_SUMMARY_LINES:
        fail(f"ckpt(1) is {summary} lines: the summary page stays under {MAX_SUMMARY_LINES}; move the "
             "reference to a page of its own")
    check_coverage(md2man, args, pages, left_out)
    check_examples(args)
    for f in failures:
        print(f)
    print(f"{len(pages)} pages; {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
