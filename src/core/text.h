// The small text pieces every renderer shares: counts and sizes as Lightning prints them, shapes, name
// lists, JSON text and strings, severity colours, Markdown cells, and `visible`, which every text and
// Markdown renderer puts around what it quotes from a file (names, globals, metadata, code lines).
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/severity.h"


namespace ckpt {

// Lightning's get_human_readable_count: 999 -> "999  ", 1234 -> "1.2 K", 132000 -> "132 K".
std::string human_count(uint64_t n);
// The exact count with Python's thousands separators (f"{n:,}"): 3002 -> "3,002".
std::string grouped_count(uint64_t n);
// Bytes in decimal units: "512 B", "4.9 kB", "3.1 GB".
std::string human_bytes(uint64_t n);
// "[4, 3]", "[]" for 0-dim.
std::string shape_text(std::span<const int64_t> s);

// `items` joined by `sep`. Past the first `most` of them the rest are left out and `more`, a format
// string given the number left out, ends the text: ", and {} more", " and {} more", ", ... ({} more)".
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ",
                 size_t most = std::numeric_limits<size_t>::max(), std::string_view more = "");

// Text read from a file, fit for a terminal: names can carry ESC sequences that erase the lines above
// (hiding a finding), OSC sequences that set the window title or the clipboard, bidi overrides that
// reorder what is shown. So C0 controls (TAB, CR and LF too: one name, one line), DEL and every byte
// that is not part of valid UTF-8 (overlong forms, surrogates, truncated sequences) become `\xNN`;
// the C1 controls U+0080-U+009F and the bidi controls U+061C, U+200E, U+200F, U+202A-U+202E and
// U+2066-U+2069 become `\uNNNN` (lower-case hex). Everything else, valid non-ASCII UTF-8 included,
// stays as it is, and so does `\`: the text is for reading (JSON is the lossless form), and leaving
// `\` alone keeps names with backslashes byte-identical and makes visible(visible(v)) == visible(v),
// so text that is already escaped (InputError::render) can pass through again.
std::string visible(std::string_view v);
// Appends code point `cp` (at most 0x10FFFF) encoded as UTF-8.
void append_utf8(std::string& out, uint32_t cp);
// visible(v), cut after at most `most` bytes at an escape or character boundary (never inside `\x1b`
// or a UTF-8 sequence); `cut` tells whether anything was left out.
std::string visible_prefix(std::string_view v, size_t most, bool* cut = nullptr);
// Whether visible(v) == v; printable ASCII is settled by one tight loop, so ordinary names cost a scan.
bool is_visible(std::string_view v);

// JSON text; strings from pickles need not be valid UTF-8, so bad bytes become U+FFFD, and the C1 and
// bidi controls visible() escapes, and DEL, are written as JSON escapes (`\u009b`, `\u202e`, `\u007f`)
// so that the document is safe to print and still holds every valid code point.
std::string json_text(const nlohmann::ordered_json& j, int indent = 2);
// Appends `v` as a JSON string, as json_text would write it.
void put_string(std::string& out, std::string_view v);

// ANSI colour for a severity label ("" without colour), and the reset after it.
const char* severity_color(Severity s, bool color);
inline const char* color_reset(bool color) { return color ? "\x1b[0m" : ""; }

// A Markdown table cell: visible(v) with `|` escaped.
std::string markdown_cell(std::string_view v);


}  // namespace ckpt
