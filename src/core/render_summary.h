// `ckpt summary`'s renderers: Lightning's table as text and Markdown, and the ckpt.summary/1 document.
// Data in, text out: nothing here reads files or decides what counts.
#pragma once

#include <cstdio>
#include <string>

#include "core/render_tensors.h"
#include "core/summary.h"

namespace ckpt {

constexpr const char* kSummarySchema = "ckpt.summary/1";

std::string render_summary_text(const Summary& s, const RenderOptions& o);
std::string render_summary_markdown(const Summary& s, const RenderOptions& o);
// The same, written to `f` in bounded chunks (a --tensors table of 100,000 rows is never held whole).
void write_summary_text(const Summary& s, const RenderOptions& o, std::FILE* f);
void write_summary_markdown(const Summary& s, const RenderOptions& o, std::FILE* f);
// The ckpt.summary/1 document, newline-terminated. Per-entry arrays are streamed, one entry a line.
std::string summary_json_text(const Summary& s);
// The same, written to `f` in bounded chunks.
void write_summary_json(const Summary& s, std::FILE* f);

}  // namespace ckpt
