// torch.export archives (.pt2): every fact testdata/gen_pt2.py had torch compute (testdata/pt2/t26 and
// t214, format in testdata/EXPECTED.md) against what ckpt reads without LibTorch, and the hostile
// archives of testdata/pt2/bad refused with one line naming the member (and JSON pointer).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "core/reader.h"
#include "core/storage.h"
#include "core/summary.h"
#include "fixtures.h"

using namespace ckpt;
using J = nlohmann::json;

namespace {

// The truth's spec kinds (torch's InputKind / OutputKind names) as ckpt's JSON spells them.
std::string spec_kind(const J& row) {
  std::string k = row["kind"].get<std::string>();
  std::transform(k.begin(), k.end(), k.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (k == "constant_tensor") return "tensor_constant";
  if (k == "buffer" && row.contains("persistent") && !row["persistent"].get<bool>()) return "buffer_non_persistent";
  return k;
}

std::vector<std::string> dims(const J& shape) {
  std::vector<std::string> out;
  for (const J& d : shape) out.push_back(d.is_string() ? d.get<std::string>() : d.dump());
  return out;
}

void check_specs(const J& truth, const std::vector<Pt2Spec>& got) {
  REQUIRE(truth.size() == got.size());
  for (size_t k = 0; k < got.size(); ++k) {
    const J& t = truth[k];
    CAPTURE(t.dump());
    CHECK(got[k].kind == spec_kind(t));
    if (t["name"].is_string()) CHECK(got[k].name == t["name"].get<std::string>());
    CHECK(got[k].target == (t["target"].is_string() ? t["target"].get<std::string>() : std::string()));
    if (t.contains("dtype")) {
      CHECK(got[k].dtype == t["dtype"].get<std::string>());
      CHECK(got[k].shape == dims(t["shape"]));
    }
  }
}

std::filesystem::path pt2_dir() { return test::testdata() / "pt2"; }

}  // namespace

TEST_CASE("pt2: every fixture equals torch's truth") {
  size_t files = 0;
  for (const char* ver : {"t26", "t214"}) {
    const auto dir = pt2_dir() / ver;
    if (!std::filesystem::exists(dir)) continue;
    std::vector<std::filesystem::path> truths;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      if (n.size() > 14 && n.substr(n.size() - 14) == ".expected.json") truths.push_back(e.path());
    }
    std::sort(truths.begin(), truths.end());
    for (const auto& tp : truths) {
      const J truth = test::read_json(tp);
      if (truth.contains("file_committed") && !truth["file_committed"].get<bool>()) continue;
      const auto file = dir / truth["file"].get<std::string>();
      CAPTURE(file.string());
      ++files;
      const Checkpoint ck = read_checkpoint(file.string());
      REQUIRE(ck.format == Format::Pt2);
      CHECK(ck.file_size == truth["file_bytes"].get<uint64_t>());

      if (truth.contains("aoti_artifacts")) {
        const J& arts = truth["aoti_artifacts"];
        REQUIRE(ck.pt2.aoti.size() == arts.size());
        for (size_t k = 0; k < arts.size(); ++k) {
          const std::string path = arts[k]["path"].get<std::string>();
          // the truth names members as zipfile lists them (with the root folder, where there is one)
          CHECK(path.size() >= ck.pt2.aoti[k].path.size());
          CHECK(path.compare(path.size() - ck.pt2.aoti[k].path.size(), std::string::npos, ck.pt2.aoti[k].path) == 0);
          CHECK(ck.pt2.aoti[k].bytes == arts[k]["bytes"].get<uint64_t>());
          CHECK(ck.pt2.aoti[k].kind == arts[k]["kind"].get<std::string>());
        }
      }
      if (!truth.contains("models")) continue;
      CHECK(ck.pt2.layout == (truth["archive_format"] == "pt2" ? "pt2-archive" : "export-zip"));
      REQUIRE(ck.pt2.models.size() == truth["models"].size());
      for (const Pt2Model& m : ck.pt2.models) {
        CAPTURE(m.name);
        REQUIRE(truth["models"].contains(m.name));
        const J& tm = truth["models"][m.name];
        const bool main = m.name == ck.pt2.main_model;

        // the operator census, node count, specs, ranges, FLOPs
        std::map<std::string, uint64_t> ops(m.ops.begin(), m.ops.end());
        CHECK(J(ops) == tm["ops"]);
        CHECK(m.nodes == tm["call_function_nodes"].get<uint64_t>());
        check_specs(tm["inputs"], m.inputs);
        check_specs(tm["outputs"], m.outputs);
        REQUIRE(m.ranges.size() == tm["range_constraints"].size());
        for (const Pt2Range& r : m.ranges) {
          CAPTURE(r.symbol);
          REQUIRE(tm["range_constraints"].contains(r.symbol));
          const J& b = tm["range_constraints"][r.symbol];
          CHECK((r.min ? J(*r.min) : J()) == b[0]);
          CHECK((r.max ? J(*r.max) : J()) == b[1]);
        }
        CHECK(m.flops == tm["flops"]["total"].get<uint64_t>());

        // state dict entries (ck.tensors for the summary's model), constants in metadata
        std::vector<const J*> sd, consts;
        for (const J& t : tm["tensors"]) (t["source"] == "state_dict" ? sd : consts).push_back(&t);
        CHECK(m.tensors == sd.size());
        if (main) {
          REQUIRE(ck.tensors.size() == sd.size());
          StorageIndex index(ck);
          // by name: torch >= 2.7 writes the weights config storage group by storage group, and
          // torch.export.load (like ckpt) gives the state dict in the config's order
          std::map<std::string, const Tensor*> by_name;
          for (const Tensor& g : ck.tensors) by_name[g.name] = &g;
          for (size_t k = 0; k < sd.size(); ++k) {
            const J& t = *sd[k];
            CAPTURE(t["name"].get<std::string>());
            REQUIRE(by_name.count(t["name"].get<std::string>()));
            const Tensor& g = *by_name[t["name"].get<std::string>()];
            CHECK(to_string(g.kind) == t["kind"].get<std::string>());
            CHECK(!g.kind_inferred);
            REQUIRE(g.dtype);
            CHECK(std::string(g.dtype->name) == t["dtype"].get<std::string>());
            CHECK(J(g.shape) == t["shape"]);
            CHECK(J(g.stride) == t["stride"]);
            CHECK(g.offset == t["storage_offset"].get<int64_t>());
            CHECK(g.requires_grad == t["requires_grad"].get<bool>());
            CHECK(g.numel == t["numel"].get<int64_t>());
            CHECK(g.bytes == t["nbytes"].get<uint64_t>());
            // the bytes are where `load` and `diff --values` will look: inside the stored member (a
            // wrapper subclass such as TwoTensor, pickled, has no storage of its own)
            const std::string type = t["tensor_type"].get<std::string>();
            if (type != "torch.Tensor" && type != "torch.nn.parameter.Parameter") {
              CHECK(!g.x->subclass.empty());
              continue;
            }
            const Storage* s = index.find(g.storage);
            REQUIRE(s != nullptr);
            CHECK(s->present);
            CHECK(index.bytes(*s).size() >= checked_extent(ck, g, *s));
          }
          const Summary sum = summarize(ck);
          const J& tot = tm["totals"];
          CHECK(sum.totals.parameters == tot["parameters"].get<uint64_t>());
          CHECK(sum.totals.trainable == tot["trainable"].get<uint64_t>());
          CHECK(sum.totals.buffers == tot["persistent_buffers"].get<uint64_t>());
          // modules: every path nn_module_stack names, with its type
          for (auto it = tm["modules"].begin(); it != tm["modules"].end(); ++it) {
            if (it.key() == "_empty_nn_module_stack_from_metadata_hook") continue;  // no module (pt2_graph.cc)
            CAPTURE(it.key());
            auto mod = std::find_if(ck.modules.begin(), ck.modules.end(), [&](const Module& x) { return x.name == it.key(); });
            REQUIRE(mod != ck.modules.end());
            CHECK(mod->qualified_type == it.value().get<std::string>());
          }
        }
        REQUIRE(m.constants.size() == consts.size());
        for (size_t k = 0; k < consts.size(); ++k) {
          const J& t = *consts[k];
          const Pt2Constant& c = m.constants[k];
          CAPTURE(c.name);
          CHECK(c.name == t["name"].get<std::string>());
          const std::string kind = t["kind"].get<std::string>();
          CHECK(c.kind == (kind == "constant"        ? "tensor_constant"
                           : kind == "custom_object" ? "custom_obj"
                                                     : "buffer_non_persistent"));
          if (t.contains("dtype")) {
            CHECK(c.dtype == t["dtype"].get<std::string>());
            CHECK(c.shape == dims(t["shape"]));
            CHECK(c.bytes == t["nbytes"].get<uint64_t>());
          }
        }
      }
    }
  }
  CHECK(files >= 5);
}

TEST_CASE("pt2: hostile archives exit 3 naming member and JSON pointer") {
  const auto dir = pt2_dir() / "bad";
  if (!std::filesystem::exists(dir / "expected.json")) return;
  const J all = test::read_json(dir / "expected.json");
  size_t n = 0;
  for (auto it = all.begin(); it != all.end(); ++it) {
    const J& e = it.value();
    if (e["command"] != "summary" || e["exit"] != 3) continue;
    ++n;
    CAPTURE(it.key());
    std::string error;
    try {
      (void)read_checkpoint((dir / it.key()).string());
    } catch (const InputError& err) { error = err.render(); }
    CAPTURE(error);
    REQUIRE(!error.empty());
    CHECK(error.find('\n') == std::string::npos);
    if (e.contains("member") && e["member"].is_string()) CHECK(error.find(e["member"].get<std::string>()) != std::string::npos);
    if (e.contains("json_pointer") && e["json_pointer"].is_string())
      CHECK(error.find(e["json_pointer"].get<std::string>()) != std::string::npos);
  }
  MESSAGE(n << " hostile archives");
}
