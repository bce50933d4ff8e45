// TorchScript tensors that named_parameters() / named_buffers() do not show (quantized packed params,
// __getstate__ states, xnnpack contexts, tensor attributes outside __buffers__), .ptl constants and
// bytecode, the frozen signal, and the name-based buffer split of state dicts, against what torch
// said about each file in testdata/tshidden/<name>.expected.json (gen_ts_hidden.py).
#include <doctest/doctest.h>

#include <map>

#include "core/reader.h"
#include "core/render_summary.h"
#include "core/summary.h"
#include "core/torchscript.h"
#include "core/zip.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

namespace {

std::vector<std::filesystem::path> expected_files() {
  std::vector<std::filesystem::path> out;
  for (const char* sub : {"tshidden", "tshidden/t26"}) {
    const auto dir = test::testdata() / sub;
    if (!std::filesystem::exists(dir)) continue;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      const std::string n = e.path().filename().string();
      if (n.size() > 14 && n.substr(n.size() - 14) == ".expected.json") out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("ts hidden: every tensor, its kind and quantization equal torch's") {
  const auto files = expected_files();
  CHECK(files.size() >= 12);
  for (const auto& path : files) {
    const json e = test::read_json(path);
    const auto file = path.parent_path() / e["fixture"].get<std::string>();
    CAPTURE(file.string());
    Checkpoint ck = read_checkpoint(file.string());
    Summary s = summarize(ck);
    const json a = json::parse(summary_json_text(s));
    std::map<std::string, const Tensor*> got;
    for (const Tensor& t : ck.tensors) got[t.name] = &t;
    CHECK(ck.tensors.size() == e["tensors"].size());
    for (const auto& et : e["tensors"]) {
      const std::string name = et["name"];
      CAPTURE(name);
      auto it = got.find(name);
      REQUIRE(it != got.end());
      const Tensor& t = *it->second;
      CHECK(to_string(t.kind) == et["kind"].get<std::string>());
      REQUIRE(t.dtype != nullptr);
      CHECK(std::string(t.dtype->name) == et["dtype"].get<std::string>());
      CHECK(json(t.shape) == et["shape"]);
      CHECK(t.numel == et["numel"].get<int64_t>());
      CHECK(t.bytes == et["bytes"].get<uint64_t>());
      CHECK(t.layout_text() == et["layout"].get<std::string>());
      if (et.contains("qscheme")) CHECK(t.x->qscheme == et["qscheme"].get<std::string>());
      if (et.contains("q_scale")) {
        CHECK(t.x->q_scale == et["q_scale"].get<double>());
        CHECK(t.x->q_zero_point == et["q_zero_point"].get<int64_t>());
        bool listed = false;
        for (const auto& jt : a["tensors"])
          if (jt["name"] == name) {
            listed = true;
            CHECK(jt["q_scale"].get<double>() == et["q_scale"].get<double>());
            CHECK(jt["q_zero_point"] == et["q_zero_point"]);
          }
        CHECK(listed);
      }
    }
    if (e.value("state_dict", false)) {
      CHECK(a["split_inferred"] == true);
      continue;
    }
    CHECK(a["totals"]["parameters"] == e["parameters"]);
    CHECK(a["totals"]["buffers"] == e["buffers"]);
    CHECK(a["totals"]["attributes"] == e["attributes"]);
    CHECK(a["totals"]["storages"] == e["storages"]);
    CHECK(a["totals"]["file_storage_bytes"] == e["file_storage_bytes"]);
    CHECK(a["metadata"]["frozen"] == e["frozen"]);
    if (e["constants"].is_null()) {
      CHECK(!ck.torchscript.constants.has_value());
    } else {
      REQUIRE(ck.torchscript.constants.has_value());
      CHECK(ck.torchscript.constants->tensors == e["constants"]["tensors"].get<uint64_t>());
      CHECK(ck.torchscript.constants->elements == e["constants"]["elements"].get<uint64_t>());
      CHECK(ck.torchscript.constants->bytes == e["constants"]["bytes"].get<uint64_t>());
    }
    std::map<std::string, const Module*> mods;
    for (const Module& m : ck.modules) mods[m.name] = &m;
    CHECK(ck.modules.size() == e["modules"].size());
    for (const auto& em : e["modules"]) {
      const std::string name = em["name"];
      CAPTURE(name);
      auto it = mods.find(name);
      REQUIRE(it != mods.end());
      if (em["training"].is_null()) CHECK(!it->second->training.has_value());
      else {
        REQUIRE(it->second->training.has_value());
        CHECK(*it->second->training == em["training"].get<bool>());
      }
    }
  }
}

TEST_CASE("ts hidden: __getstate__ element names come from the method's code") {
  TsClass c;
  c.methods.push_back(TsMethod{"__getstate__",
                               {},
                               {{1, "w, b, = (self)._weight_bias()"},
                                {2, "scale = self.scale"},
                                {3, "training = self.training"},
                                {4, "_6 = (w, b, scale, (1, 2), training)"},
                                {5, "return _6"}}});
  CHECK(getstate_names(c, 5) == std::vector<std::string>{"w", "b", "scale", "3", "training"});
  CHECK(getstate_names(c, 4) == std::vector<std::string>{"0", "1", "2", "3"});  // count differs: indexes
  c.methods[0].body = {{1, "return (self.a, self.training)"}};
  CHECK(getstate_names(c, 2) == std::vector<std::string>{"a", "training"});
  CHECK(getstate_names(TsClass{}, 2) == std::vector<std::string>{"0", "1"});
  for (const char* ret : {"return (", "return ()", "return x", "return ((,)", "return (self.)"}) {
    c.methods[0].body = {{1, ret}};
    CHECK(getstate_names(c, 1).size() == 1);
  }
}

TEST_CASE("ts hidden: flipped bytes in data.pkl, constants.pkl and bytecode.pkl give a clean error or a result") {
  for (const char* name : {"qdynamic.pt", "qstatic.pt", "mobile_opt.ptl", "tensor_attr.pt"}) {
    CAPTURE(name);
    std::string bytes = test::read_file(test::testdata() / "tshidden" / name);
    std::vector<std::pair<size_t, size_t>> regions;  // the stored pickles, by file offset
    {
      auto f = MappedFile::from_memory(bytes, name);
      ZipReader z(f->view(), Limits{});
      for (const ZipEntry& e : z.entries()) {
        const std::string_view n = e.name;
        if (n.size() < 4 || n.substr(n.size() - 4) != ".pkl" || n.find("/code/") != std::string_view::npos || e.method != 0)
          continue;
        ByteView v = z.stored(e);
        regions.emplace_back(static_cast<size_t>(v.data() - f->view().data()), v.size());
      }
    }
    CHECK(regions.size() >= 2);
    for (const auto& [start, size] : regions)
      for (size_t pos = start; pos < start + size; ++pos) {
        bytes[pos] = static_cast<char>(bytes[pos] ^ 0xA5);
        try {
          Checkpoint ck = read_checkpoint(MappedFile::from_memory(bytes, name));
          Summary s = summarize(ck);
          CHECK_FALSE(nlohmann::json::parse(summary_json_text(s)).is_discarded());
        } catch (const InputError& e) { CHECK(e.render().find('\n') == std::string::npos); }
        bytes[pos] = static_cast<char>(bytes[pos] ^ 0xA5);
      }
  }
}
