#!/usr/bin/env python3
"""Checks that every relative link and #anchor in README.md, docs/*.md and man/README.md resolves.

A link target must be a file or folder of the repository (relative to the page), and an anchor must
be a heading of the target page, slugged as GitHub does (lower case, punctuation other than - and _
dropped, spaces as -, a repeated heading gets -1, -2, ...). Links inside code spans and code blocks
are not links. http(s) and mailto links are not fetched. Exit status 1 and one line per bad link.

  check_links.py [--root DIR]
"""
import argparse
import os
import re
import sys

LINK = re.compile(r"(?<!\\)\[((?:[^\]`]|`[^`]*`)*)\]\(([^)\s]+)\)")


def prose(text):
    """The page without its code blocks and code spans, line numbers kept."""
    out = []
    fence = None
    for line in text.split("\n"):
        m = re.match(r"^\s*(`{3,})", line)
        if fence:
            if m and line.strip() == fence:
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        out.append(line)
    return out


def anchors(path):
    seen = {}
    result = set()
    for line in prose(open(path, encoding="utf-8").read()):
        m = re.match(r"^#{1,6} (.*)$", line)
        if not m:
            continue
        s = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(s, 0)
        seen[s] = n + 1
        result.add(s if n == 0 else f"{s}-{n}")
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    root = os.path.abspath(ap.parse_args().root)
    pages = ["README.md", "man/README.md"] + sorted(
        os.path.join("docs", f) for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
    bad = checked = 0
    cache = {}
    for rel in pages:
        path = os.path.join(root, rel)
        for n, line in enumerate(prose(open(path, encoding="utf-8").read()), 1):
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                target = m.group(2)
                if re.match(r"(https?|mailto):", target):
                    continue
                checked += 1
                file, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
                problem = None
                if not os.path.exists(dest):
                    problem = "no such file"
                elif not dest.startswith(root + os.sep):
                    problem = "outside the repository"
                elif anchor:
                    if not dest.endswith(".md"):
                        problem = "an anchor into a file that is not Markdown"
                    else:
                        if dest not in cache:
                            cache[dest] = anchors(dest)
                        if anchor not in cache[dest]:
                            problem = f"no heading with anchor #{anchor} in {os.path.relpath(dest, root)}"
                if problem:
                    bad += 1
                    print(f"{rel}:{n}: ({target}): {problem}")
    print(f"{checked} relative link(s) checked in {len(pages)} pages, {bad} broken")
    return 1 if bad or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
