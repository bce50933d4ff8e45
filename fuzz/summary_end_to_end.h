// `ckpt summary` end to end on one in-memory file, for the reader targets: read, count, findings and the
// security scan, then every renderer at full depth, with the tensor table. Bad input may only throw InputError.
#pragma once

#include <memory>
#include <utility>

#include "core/findings.h"
#include "core/reader.h"
#include "core/render_summary.h"
#include "core/summary.h"

inline void summary_end_to_end(const std::shared_ptr<ckpt::MappedFile>& f) {
  ckpt::Limits lim;
  lim.pickle_ops = 1'000'000;
  try {
    ckpt::Checkpoint ck = ckpt::read_checkpoint(f, lim);
    ckpt::Summary s = ckpt::summarize(ck);
    s.findings = ckpt::findings(ck, s);
    for (ckpt::Finding& x : ckpt::security_findings(*f, lim)) s.findings.push_back(std::move(x));
    ckpt::RenderOptions o;
    o.depth = -1;
    o.tensors = true;
    (void)ckpt::render_summary_text(s, o);
    (void)ckpt::render_summary_markdown(s, o);
    (void)ckpt::summary_json_text(s);
  } catch (const ckpt::InputError&) {}
}
