// Every fixture written by real PyTorch (testdata/gen_fixtures*.py) against the numbers PyTorch reported
// for it in <name>.expected.json. Nothing expected here comes from ckpt.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/findings.h"
#include "core/reader.h"
#include "core/render_summary.h"
#include "core/summary.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

namespace {

json summary_of(const test::Fixture& f) {
  Checkpoint ck = read_checkpoint(f.file.string());
  Summary s = summarize(ck);
  s.findings = findings(ck, s);  // as `ckpt summary` shows them
  for (Finding& x : security_findings(f.file.string(), &ck, Limits{})) s.findings.push_back(std::move(x));
  return json::parse(summary_json_text(s));
}

const json* find_named(const json& arr, const std::string& name) {
  for (const auto& e : arr)
    if (e.at("name") == name) return &e;
  return nullptr;
}

}  // namespace

TEST_CASE("fixtures: there are fixtures to test") { CHECK(test::fixtures().size() >= 15); }

TEST_CASE("fixtures: format, prefix and records equal what torch wrote") {
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    json e = test::read_json(f.expected), a = summary_of(f);
    CHECK(a["schema"] == "ckpt.summary/1");
    CHECK(a["format"] == e["format"]);
    if (e.contains("prefix")) CHECK(a["prefix"] == e["prefix"]);
    if (e.contains("records"))
      for (auto it = e["records"].begin(); it != e["records"].end(); ++it) {
        CAPTURE(it.key());
        CHECK(a["records"][it.key()] == it.value());
      }
  }
}

TEST_CASE("fixtures: totals equal PyTorch's counts") {
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    json e = test::read_json(f.expected), a = summary_of(f);
    // TorchScript: "totals" is what the live module's de-duplicating iterators give (parameters(),
    // buffers(), named_modules()); "totals_all" counts entries at every path, as state_dict() lists them.
    json want = e["totals"];
    if (e.contains("totals_all"))
      for (auto it = e["totals_all"].begin(); it != e["totals_all"].end(); ++it) want[it.key()] = it.value();
    for (auto it = want.begin(); it != want.end(); ++it) {
      CAPTURE(it.key());
      CHECK(a["totals"][it.key()] == it.value());
    }
    if (e.contains("file") && e["file"].is_object()) {
      // "file" counts data/ records; TorchScript constants have storages of their own (constants/).
      CHECK(a["totals"]["storages"] == e["file"]["storages"].get<int>() + e.value("constants_tensors", 0));
      CHECK(a["totals"]["file_storage_bytes"] == e["file"]["storage_bytes"].get<int>() + e.value("constants_storage_bytes", 0));
    }
  }
}

TEST_CASE("fixtures: every tensor entry equals what torch.load gives") {
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    json e = test::read_json(f.expected), a = summary_of(f);
    const json& want = e.contains("tensors_all") ? e["tensors_all"] : e["tensors"];
    CHECK(a["tensors"].size() == want.size());
    for (const auto& et : want) {
      const std::string name = et["name"];
      CAPTURE(name);
      const json* at = find_named(a["tensors"], name);
      REQUIRE(at != nullptr);
      for (const char* field : {"dtype", "shape", "stride", "numel", "bytes", "kind", "state", "requires_grad", "device",
                                "offset", "layout", "qscheme"}) {
        if (!et.contains(field)) continue;
        CAPTURE(field);
        // Expected null for fields the file does not record (uninitialized entries).
        CHECK((*at)[field] == et[field]);
      }
    }
  }
}

TEST_CASE("fixtures: tensors come in the file's order") {
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    json e = test::read_json(f.expected), a = summary_of(f);
    // Modules (pickled or TorchScript) list parameters and buffers per module, state_dict()-style,
    // while the generator lists named_parameters() then named_buffers().
    // safetensors lists tensors by data offset; sharded checkpoints shard by shard.
    if (e["format"] == "torchscript" || a["content"] == "module" || e["format"] == "sharded" || e["format"] == "dcp") continue;
    std::vector<std::string> want, got;
    for (const auto& t : e["tensors"]) want.push_back(t["name"]);
    for (const auto& t : a["tensors"]) got.push_back(t["name"]);
    CHECK(got == want);
  }
}

TEST_CASE("fixtures: per-module counts equal named_modules()") {
  for (const auto& f : test::fixtures()) {
    if (!test::read_json(f.expected).contains("modules")) continue;
    CAPTURE(f.id);
    json e = test::read_json(f.expected), a = summary_of(f);
    for (const auto& em : e["modules"]) {
      const std::string name = em["name"];
      CAPTURE(name);
      const json* am = find_named(a["modules"], name);
      REQUIRE(am != nullptr);
      CHECK((*am)["parameters"] == em["parameters"]);
      CHECK((*am)["buffers"] == em["buffers"]);
      if (em.contains("trainable")) CHECK((*am)["trainable"] == em["trainable"]);
      if (em.contains("type")) CHECK((*am)["type"] == em["type"]);
      if (em.contains("qualified_type")) CHECK((*am)["qualified_type"] == em["qualified_type"]);
      if (em.contains("training"))
        CHECK((*am)["mode"] == (em["training"].is_null() ? json() : json(em["training"].get<bool>() ? "train" : "eval")));
    }
  }
}

TEST_CASE("fixtures: Lightning and training-checkpoint metadata") {
  for (const auto& f : test::fixtures()) {
    json e = test::read_json(f.expected);
    if (!e.contains("metadata") && !e.contains("other")) continue;
    CAPTURE(f.id);
    json a = summary_of(f);
    const json& md = a["metadata"];
    if (e.contains("metadata")) {
      const json& em = e["metadata"];
      for (const char* k :
           {"epoch", "global_step", "pytorch-lightning_version", "hparams_name", "hyper_parameters", "callbacks", "loops"}) {
        if (!em.contains(k)) continue;
        CAPTURE(k);
        CHECK(md[k] == em[k]);
      }
      for (const char* k : {"optimizer_states", "lr_schedulers"}) {
        if (!em.contains(k)) continue;
        CAPTURE(k);
        for (auto it = em[k].begin(); it != em[k].end(); ++it) CHECK(md[k][it.key()] == it.value());
      }
    }
    if (e.contains("other")) {
      CHECK(a["model_key"] == e["model_key"]);
      for (auto it = e["other"].begin(); it != e["other"].end(); ++it) {
        if (it.key() == "keys") continue;
        CAPTURE(it.key());
        if (it->is_object())
          for (auto jt = it->begin(); jt != it->end(); ++jt) CHECK(md[it.key()][jt.key()] == jt.value());
        else CHECK(md[it.key()] == it.value());
      }
    }
  }
}

TEST_CASE("fixtures: lazy and meta entries are named in warnings") {
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    json e = test::read_json(f.expected), a = summary_of(f);
    auto has = [&](const char* id) {
      for (const auto& w : a["warnings"])
        if (w["id"] == id) return true;
      return false;
    };
    CHECK(has("uninitialized-parameters") == (e["totals"]["uninitialized"].get<int>() > 0));
    CHECK(has("meta-tensors") == (e["totals"]["meta"].get<int>() > 0));
    for (const auto& w : a["warnings"]) {
      CHECK(w.contains("id"));
      CHECK(w.contains("severity"));
      CHECK(w.contains("message"));
      CHECK(w.contains("fix"));
      CHECK(w.contains("where"));
      if (w["id"] == "uninitialized-parameters")
        for (const auto& t : e["tensors"])
          if (t["state"] == "uninitialized")
            CHECK(std::find(w["where"].begin(), w["where"].end(), t["name"]) != w["where"].end());
    }
  }
}

TEST_CASE("fixtures: TorchScript methods, entry points, frozen constants and shared modules") {
  size_t seen = 0;
  for (const auto& f : test::fixtures()) {
    json e = test::read_json(f.expected);
    if (e["format"] != "torchscript") continue;
    ++seen;
    CAPTURE(f.id);
    json a = summary_of(f);
    if (e.contains("methods")) {
      std::vector<std::string> all, from_forward, entry;
      for (const auto& m : a["methods"]) {
        all.push_back(m["name"]);
        if (m["reachable_from_forward"] == true) from_forward.push_back(m["name"]);
        if (m["entry_point"] == true) entry.push_back(m["name"]);
      }
      for (auto* v : {&all, &from_forward, &entry}) std::sort(v->begin(), v->end());
      CHECK(json(all) == e["methods"]["all"]);
      if (e["methods"].contains("from_forward")) CHECK(json(from_forward) == e["methods"]["from_forward"]);
      CHECK(json(entry) == e["methods"]["entry_points"]);
    }
    if (e.contains("frozen")) CHECK(a["metadata"]["frozen"] == e["frozen"]);
    if (e.value("frozen", false)) {
      CHECK(a["metadata"]["constants"]["tensors"] == e["constants_tensors"]);
      CHECK(a["metadata"]["constants"]["elements"] == e["constants_elements"]);
      bool said = false;
      for (const auto& w : a["warnings"]) said |= w["id"] == "frozen-module";
      CHECK(said);
    }
    for (const auto& sp : e.value("shared_paths", json::array())) {
      CAPTURE(sp);
      const json* am = find_named(a["modules"], sp["name"]);
      REQUIRE(am != nullptr);
      CHECK((*am)["shared_with"] == sp["same_as"]);
    }
  }
  CHECK(seen >= 12);
}
