#!/usr/bin/env python3
"""Checks the generated ckpt(1): `man --warnings` prints no warning, and it has the usual sections.

man-db's `man -l` runs the page through preconv, tbl and groff (-ww with --warnings); any message on
stderr fails the test. The sections of man/pages.txt must all be there, in order, and each ## heading
of the pages they come from must appear in the formatted text, so a page dropped by the generator fails.

  man_page.py --page build/man/ckpt.1 --root DIR
"""
import argparse
import os
import re
import subprocess
import sys

REQUIRED = ["NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "OPTIONS", "EXIT STATUS", "ENVIRONMENT", "FILES",
            "SEE ALSO"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--page", required=True)
    ap.add_argument("--root", required=True)
    args = ap.parse_args()
    failures = []
    text = ""
    for width in ("80", "120"):
        env = dict(os.environ, MANWIDTH=width, LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
        env.pop("MANPAGER", None)
        r = subprocess.run(["man", "--warnings", "-l", args.page], env=env, capture_output=True, text=True)
        if r.returncode != 0 or r.stderr.strip():
            failures.append(f"man --warnings -l (MANWIDTH={width}) exit {r.returncode}:\n{r.stderr}")
        text = text or r.stdout
    text = re.sub(r".\x08", "", text)
    sections = [l for l in text.split("\n") if re.match(r"^[A-Z][A-Z ]+$", l)]
    at = -1
    for s in REQUIRED:
        if s not in sections:
            failures.append(f"no section {s}")
        elif sections.index(s) < at:
            failures.append(f"section {s} out of order")
        else:
            at = sections.index(s)
    flat = re.sub(r"\s+", " ", text)
    for line in open(os.path.join(args.root, "man", "pages.txt"), encoding="utf-8"):
        line = line.strip()
        if not line or line.startswith("#") or line.startswith("NAME"):
            continue
        page = os.path.join(args.root, line.partition("|")[2].strip().partition("#")[0])
        fence = False
        for l in open(page, encoding="utf-8"):
            if l.lstrip().startswith("```"):
                fence = not fence
            m = not fence and re.match(r"^## (.*)$", l)
            if m:
                title = re.sub(r"\s+", " ", re.sub(r"[`*]|\[|\]\([^)]*\)", "", m.group(1))).strip()
                if title.upper() not in flat.upper():
                    failures.append(f"{os.path.relpath(page, args.root)}: heading '{title}' is not in the man page")
    for f in failures:
        print(f)
    print(f"{len(sections)} sections; {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
