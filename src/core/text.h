// The small text pieces every renderer shares: counts and sizes as Lightning prints them, shapes, name
// lists, JSON text and strings, severity colours, Markdown cells.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"

namespace ckpt {

// Lightning's get_human_readable_count: 999 -> "999  ", 1234 -> "1.2 K", 132000 -> "132 K".
std::string human_count(uint64_t n);
// Bytes in decimal units: "512 B", "4.9 kB", "3.1 GB".
std::string human_bytes(uint64_t n);
// "[4, 3]", "[]" for 0-dim.
std::string shape_text(const std::vector<int64_t>& s);

// `items` joined by `sep`. Past the first `most` of them the rest are left out and `more`, a format
// string given the number left out, ends the text: ", and {} more", " and {} more", ", ... ({} more)".
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ",
                 size_t most = std::numeric_limits<size_t>::max(), std::string_view more = "");

// JSON text; strings from pickles need not be valid UTF-8, so bad bytes become U+FFFD.
std::string json_text(const nlohmann::ordered_json& j, int indent = 2);
// Appends `v` as a JSON string, as json_text would write it.
void put_string(std::string& out, std::string_view v);

// ANSI colour for a severity label ("" without colour), and the reset after it.
const char* severity_color(Severity s, bool color);
inline const char* color_reset(bool color) { return color ? "\x1b[0m" : ""; }

// A Markdown table cell: `|` escaped.
std::string markdown_cell(std::string_view v);

// The format's name in headers: "torch.save zip", "safetensors", ...
const char* format_title(const Checkpoint& ck);

}  // namespace ckpt
