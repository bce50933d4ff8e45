// Every format reader (torch.save zip, TorchScript, legacy stream, bare pickle), the counting and the
// renderers, end to end as `ckpt summary` runs them.
#include <string>

#include "core/findings.h"
#include "core/reader.h"
#include "core/render_summary.h"
#include "core/summary.h"
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = ckpt::MappedFile::from_memory(std::string(reinterpret_cast<const char*>(data), size), "fuzz.pt");
  ckpt::Limits lim;
  lim.pickle_ops = 1'000'000;
  try {
    ckpt::Checkpoint ck = ckpt::read_checkpoint(f, lim);
    ckpt::Summary s = ckpt::summarize(ck);
    s.findings = ckpt::findings(ck, s);
    for (ckpt::Finding& x : ckpt::security_findings(*f, lim)) s.findings.push_back(std::move(x));
    ckpt::RenderOptions o;
    o.depth = -1;
    (void)ckpt::render_summary_text(s, o);
    (void)ckpt::render_summary_markdown(s, o);
    (void)ckpt::summary_json_text(s);
  } catch (const ckpt::InputError&) {}
  return 0;
}
