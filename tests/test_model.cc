// `summary --model ARCH` (src/core/model.cc, no LibTorch) against PyTorch's numbers in
// testdata/forward/expected.json (testdata/gen_forward.py): lazy entries sized from the architecture
// with exact totals, the Lightning 'model.' prefix found, ARCH's module tree under FILE's names; and
// the sizes notation of the text table. Runs in the sanitizer build too.
#include <doctest/doctest.h>

#include <map>

#include "core/findings.h"
#include "core/model.h"
#include "core/reader.h"
#include "core/render_summary.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

namespace {
json forward_case(const std::string& name) {
  const json e = test::read_json(test::testdata() / "forward" / "expected.json");
  for (const json& c : e["cases"])
    if (c["name"] == name) return c;
  FAIL("no case " << name);
  return {};
}
std::string fwd(const std::string& f) { return (test::testdata() / "forward" / f).string(); }
}  // namespace

TEST_CASE("model: lazy entries take the architecture's shapes, and the totals equal PyTorch's") {
  const json c = forward_case("lazy");
  Checkpoint ck = read_checkpoint(fwd(c["file"]));
  const Checkpoint arch = read_checkpoint(fwd(c["model"]));
  REQUIRE(summarize(ck).totals.uninitialized == c["resolved"].size());  // before: all lazy
  const ModelReport m = apply_model(ck, arch, "", "");
  CHECK(m.strip_prefix.empty());
  CHECK_FALSE(m.prefix_guessed);
  CHECK(m.missing == 0);
  CHECK(m.unexpected == 0);
  std::map<std::string, std::vector<int64_t>> got(m.resolved.begin(), m.resolved.end());
  std::map<std::string, std::vector<int64_t>> want;
  for (auto it = c["resolved"].begin(); it != c["resolved"].end(); ++it) want[it.key()] = it->get<std::vector<int64_t>>();
  CHECK(got == want);
  const Summary s = summarize(ck);
  CHECK(s.totals.uninitialized == 0);
  CHECK(s.totals.parameters == c["totals"]["parameters"].get<uint64_t>());
  CHECK(s.totals.trainable == c["totals"]["trainable"].get<uint64_t>());
  CHECK(s.totals.buffers == c["totals"]["buffers"].get<uint64_t>());
  CHECK(s.totals.parameter_bytes == c["totals"]["parameter_bytes"].get<uint64_t>());
  CHECK(s.uninitialized_entries.empty());
  for (const Finding& f : findings(ck, s)) CHECK(f.id != "uninitialized-parameters");
  // ARCH's tree names the rows: every module PyTorch recorded is a row with a type.
  for (auto it = c["modules"].begin(); it != c["modules"].end(); ++it) {
    CAPTURE(it.key());
    bool found = false;
    for (const ModuleRow& r : s.modules) found |= r.name == it.key() && !r.type().empty();
    CHECK(found);
  }
}

TEST_CASE("model: a Lightning state dict finds its 'model.' prefix, and ARCH's modules keep FILE's names") {
  const json c = forward_case("lit_convnet");
  Checkpoint ck = read_checkpoint(fwd(c["file"]));
  const Checkpoint arch = read_checkpoint(fwd(c["model"]));
  const ModelReport m = apply_model(ck, arch, "", "");
  CHECK(m.strip_prefix == "model.");
  CHECK(m.prefix_guessed);
  CHECK(m.matched == arch.tensors.size());
  CHECK(m.missing + m.unexpected + m.mismatched == 0);
  CHECK(file_module_path("", m) == "model");
  CHECK(file_module_path("features.0", m) == "model.features.0");
  const Summary s = summarize(ck);
  for (auto it = c["modules"].begin(); it != c["modules"].end(); ++it) {
    CAPTURE(it.key());
    bool found = false;
    for (const ModuleRow& r : s.modules) found |= r.name == "model." + it.key();
    CHECK(found);  // modules without tensors (ReLU, MaxPool2d) too
  }
  // Given prefixes are kept, not guessed.
  Checkpoint again = read_checkpoint(fwd(c["file"]));
  const ModelReport given = apply_model(again, arch, "model.", "");
  CHECK_FALSE(given.prefix_guessed);
  CHECK(given.matched == arch.tensors.size());
}

TEST_CASE("model: file_module_path inverts --add-prefix") {
  ModelReport m;
  m.add_prefix = "module.";
  CHECK(file_module_path("module.features", m) == "features");
  CHECK(file_module_path("module", m) == "");
  CHECK_FALSE(file_module_path("other", m).has_value());
}

TEST_CASE("render: In sizes / Out sizes as Lightning prints them, FLOPs column and total") {
  Checkpoint ck = read_checkpoint(fwd("multi.pt"));
  Summary s = summarize(ck);
  ForwardReport f;
  f.device = "cpu";
  f.libtorch = "x";
  f.flops = 3008;
  f.out_sizes = json::parse(R"([{"cls": [4, 3]}, [4, 2]])");
  f.modules["pair"] = ModuleForward{json::parse(R"([[4, 8], [4, 6]])"), json::parse(R"([[4, 8], "?"])"), 896, 1};
  f.modules["heads"] = ModuleForward{json::parse("[4, 8]"), nlohmann::ordered_json::parse(R"({"cls": [4, 3], "box": [4, 4]})"),
                                     448, 1};
  s.forward = f;
  RenderOptions o;
  const std::string text = render_summary_text(s, o);
  CHECK(text.find("| 896   | [[4, 8], [4, 6]] | [[4, 8], '?']") != std::string::npos);
  CHECK(text.find("| {'cls': [4, 3], 'box': [4, 4]}") != std::string::npos);
  CHECK(text.find("| ?                | ?") != std::string::npos);  // a module that did not run
  CHECK(text.find("3.0 K     Total Flops") != std::string::npos);
  CHECK(text.find("out [{'cls': [4, 3]}, [4, 2]]") != std::string::npos);
  const json j = json::parse(summary_json_text(s));
  CHECK(j["forward"]["flops"] == 3008);
  CHECK(j["modules"][1]["name"] == "pair");
  CHECK(j["modules"][1]["out_sizes"] == json::parse(R"([[4, 8], "?"])"));
  CHECK(j["modules"][1]["calls"] == 1);
}
