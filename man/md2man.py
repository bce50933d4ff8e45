#!/usr/bin/env python3
"""Generates the ckpt(1) man page from the Markdown reference in docs/, so that the two cannot drift.

The build runs it (cmake/Packaging.cmake); man/pages.txt says which page becomes which section, in
order. It accepts only the Markdown subset that docs/writing-docs.md defines, and stops with
FILE:LINE on anything else, so a construct it would render wrongly fails the build instead.

  md2man.py --pages man/pages.txt --version 0.1.0 --out build/man/ckpt.1
"""
import argparse
import os
import re
import sys

FENCE = re.compile(r"^( *)(`{3,})(.*)$")
HEADING = re.compile(r"^(#{1,6}) (.*)$")
ITEM = re.compile(r"^( *)(?:[-*]|(\d+)\.) (.*)$")
TABLE_SEP = re.compile(r"^\|(\s*:?-+:?\s*\|)+\s*$")


class DocError(Exception):
    pass


def escape(text):
    """Roff-escapes plain text: backslashes, and every non-ASCII character as a named glyph."""
    out = []
    for ch in text:
        if ch == "\\":
            out.append("\\e")
        elif ord(ch) > 127:
            out.append("\\[u%04X]" % ord(ch))
        else:
            out.append(ch)
    return "".join(out)


def inline(text):
    """Renders the inline subset: `code`, **bold**, *italic*, [text](target), and \\-escapes."""
    out = []
    i = 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "\\`*_[]()|#<>!-.":
            out.append(escape(text[i + 1]))
            i += 2
        elif c == "`":
            n = len(text[i:]) - len(text[i:].lstrip("`"))
            ticks = text[i:i + n]
            end = text.find(ticks, i + n)
            if end < 0:
                raise DocError("unclosed code span")
            code = text[i + n:end].replace("\n", " ")
            if n > 1:
                code = code.strip()
            # Code is bold, as options are in man pages; \- so that options copy as ASCII hyphens.
            out.append("\\fB" + escape(code).replace("-", "\\-") + "\\fR")
            i = end + n
        elif text.startswith("**", i):
            end = text.find("**", i + 2)
            if end < 0:
                raise DocError("unclosed **")
            out.append("\\fB" + inline(text[i + 2:end]).replace("\\fR", "\\fB") + "\\fR")
            i = end + 2
        elif c == "*" and i + 1 < len(text) and text[i + 1] not in " *\n" and (i == 0 or not text[i - 1].isalnum()):
            end = text.find("*", i + 1)
            if end < 0:
                out.append("*")
                i += 1
                continue
            out.append("\\fI" + inline(text[i + 1:end]).replace("\\fR", "\\fI") + "\\fR")
            i = end + 1
        elif c == "[":
            m = re.match(r"\[((?:[^\]`]|`[^`]*`)*)\]\(([^)\s]*)\)", text[i:])
            if not m:
                out.append("[")
                i += 1
                continue
            label, target = m.group(1), m.group(2)
            out.append(inline(label))
            if re.match(r"https?://", target) and label != target:
                out.append(" <" + escape(target) + ">")
            i += m.end()
        else:
            out.append(escape(c))
            i += 1
    return "".join(out)


def text_lines(lines):
    """Inline-rendered lines for fill mode: no leading blanks, and no line starting as a request."""
    out = []
    # Inline spans may go on over a line break, so the paragraph is rendered as one text.
    for r in inline("\n".join(line.strip() for line in lines)).split("\n"):
        r = r.lstrip()
        if r.startswith((".", "'")):
            r = "\\&" + r
        out.append(r)
    return out


def code_block(lines, indent):
    out = [".PP", ".RS 4" if not indent else ".RS 2", ".nf"]
    for line in lines:
        line = line[indent:] if line[:indent].strip() == "" else line.lstrip()
        r = escape(line).replace("-", "\\-")
        if r.startswith((".", "'")):
            r = "\\&" + r
        out.append(r)
    out += [".fi", ".RE"]
    return out


def split_row(line):
    cells, cur, i = [], "", 0
    line = line.strip()[1:]
    code = False
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line) and line[i + 1] == "|":
            cur += "|"
            i += 2
            continue
        if c == "`":
            code = not code
        if c == "|" and not code:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += c
        i += 1
    if cur.strip():
        cells.append(cur.strip())
    return cells


def table(rows):
    """A table as tagged paragraphs: the first cell is the tag, the other cells its body."""
    header = split_row(rows[0])
    out = []
    for row in rows[2:]:
        cells = split_row(row)
        if len(cells) != len(header):
            raise DocError(f"a table row has {len(cells)} cells, its header {len(header)}")
        out += [".TP", inline(cells[0])]
        if len(cells) == 2:
            out += text_lines([cells[1]])
        else:
            for k, (h, c) in enumerate(zip(header[1:], cells[1:])):
                if k:
                    out.append(".br")
                out += text_lines([f"*{h}*: {c}" if c else f"*{h}*: \u2014"])
    return out


def heading(level, title, base):
    """base: the Markdown level that becomes .SH; one below it .SS; deeper, a bold paragraph."""
    text = inline(title)
    if level == base:
        return [".SH " + '"' + text.upper().replace('"', '\\(dq') + '"']
    if level == base + 1:
        return [".SS " + '"' + text.replace('"', '\\(dq') + '"']
    return [".PP", "\\fB" + text.replace("\\fR", "\\fB") + "\\fR"]


def slug(title):
    """The anchor GitHub gives a heading."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def one_section(path, lines, anchor):
    """The page's # title and the ## section whose anchor is given, without its ## line."""
    fence = None
    start = end = None
    for n, line in enumerate(lines):
        m = FENCE.match(line)
        if m and (fence is None or line.strip() == fence):
            fence = None if fence else m.group(2)
            continue
        h = not fence and HEADING.match(line)
        if h and len(h.group(1)) <= 2:
            if start is not None and end is None:
                end = n
            if len(h.group(1)) == 2 and slug(h.group(2)) == anchor:
                start = n + 1
    if start is None:
        raise SystemExit(f"{path}: no ## section with the anchor #{anchor}")
    return ["# (section)"] + lines[start:end]


def render(path, base, drop_title):
    """Renders one docs page, or with PATH#anchor one ## section of it. drop_title: the page's #
    title is not printed (its section is)."""
    path, _, anchor = path.partition("#")
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if anchor:
        lines = one_section(path, lines, anchor)
    out = []
    i = 0
    list_depth = []  # indents of the open list levels
    seen_title = False

    def close_lists(to=0):
        while len(list_depth) > to:
            list_depth.pop()
            if list_depth:
                out.append(".RE")

    try:
        while i < len(lines):
            line = lines[i]
            if not line.strip():
                i += 1
                continue
            m = FENCE.match(line)
            if m:
                indent, fence = len(m.group(1)), m.group(2)
                j = i + 1
                while j < len(lines) and lines[j].strip() != fence:
                    j += 1
                if j == len(lines):
                    raise DocError("unclosed code fence")
                if not (indent and list_depth):
                    close_lists()
                out += code_block(lines[i + 1:j], indent)
                i = j + 1
                continue
            m = HEADING.match(line)
            if m:
                close_lists()
                level = len(m.group(1))
                if level == 1:
                    if seen_title:
                        raise DocError("a page has one # title")
                    seen_title = True
                    if not drop_title:
                        out += heading(level, m.group(2), base)
                else:
                    out += heading(level, m.group(2), base)
                i += 1
                continue
            if not seen_title:
                raise DocError("a page starts with its # title")
            if line.startswith("|"):
                close_lists()
                j = i
                while j < len(lines) and lines[j].startswith("|"):
                    j += 1
                if j - i < 2 or not TABLE_SEP.match(lines[i + 1]):
                    raise DocError("a table needs a header row and a |---| row")
                out += table(lines[i:j])
                i = j
                continue
            m = ITEM.match(line)
            if m:
                indent = len(m.group(1))
                while list_depth and indent < list_depth[-1]:
                    close_lists(len(list_depth) - 1)
                if not list_depth or indent > list_depth[-1]:
                    if list_depth:
                        out.append(".RS")
                    list_depth.append(indent)
                bullet = (m.group(2) + ".") if m.group(2) else "\\(bu"
                para = [m.group(3)]
                j = i + 1
                cont = indent + 2
                while j < len(lines) and lines[j].strip() and lines[j].startswith(" " * cont) \
                        and not ITEM.match(lines[j]) and not FENCE.match(lines[j]):
                    para.append(lines[j])
                    j += 1
                out += [".IP " + bullet + " " + ("4" if m.group(2) else "2")] + text_lines(para)
                i = j
                continue
            if line.startswith(("<", ">")):
                raise DocError("HTML and block quotes are outside the subset")
            if line.startswith(" ") and list_depth:
                # A further paragraph of the open list item.
                j = i
                while j < len(lines) and lines[j].strip() and not ITEM.match(lines[j]) \
                        and not FENCE.match(lines[j]):
                    j += 1
                out += [".IP \"\" 2"] + text_lines(lines[i:j])
                i = j
                continue
            close_lists()
            j = i
            while j < len(lines) and lines[j].strip() and not HEADING.match(lines[j]) \
                    and not FENCE.match(lines[j]) and not lines[j].startswith("|") and not ITEM.match(lines[j]):
                j += 1
            out += [".PP"] + text_lines(lines[i:j])
            i = j
        close_lists()
    except DocError as e:
        raise SystemExit(f"{path}:{i + 1}: {e}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", required=True, help="man/pages.txt")
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(args.pages)))
    out = ['.\\" Generated by man/md2man.py from docs/*.md (order: man/pages.txt); edit those, not this.',
           f'.TH CKPT 1 "" "ckpt {args.version}" "User Commands"', ".nh", ".ad l"]
    with open(args.pages, encoding="utf-8") as f:
        for n, raw in enumerate(f, 1):
            raw = raw.strip()
            if not raw or raw.startswith("#"):
                continue
            section, _, rest = (p.strip() for p in raw.partition("|"))
            if section == "NAME":
                out += [".SH NAME", escape(rest).replace(" - ", " \\- ", 1)]
                continue
            page = os.path.join(root, rest)
            if section == "*":
                # The page's ## headings are the sections; its # title and intro are not printed.
                out += render(page, 2, drop_title=True)
            elif section.startswith("+"):
                # A subsection of the last section: the page's # title becomes .SS.
                out += render(page, 0, drop_title=False)
            else:
                out += heading(1, section, 1)
                out += render(page, 1, drop_title=True)
    text = "\n".join(out) + "\n"
    text = re.sub(r"(?m)^\.PP\n(\.(?:PP|SH|SS|TP|IP).*)$", r"\1", text)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
