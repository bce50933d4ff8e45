// `ckpt check` rules against fixtures whose findings are known by construction (testdata/gen_check.py):
// every expected finding fires with the expected `where`, and nothing else does (false positives are bugs).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "core/findings.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

namespace {

// Informational findings of `summary` that the rule fixtures do not list.
bool informational(const std::string& id) { return id == "tied-weights" || id == "storage-views" || id == "frozen-module"; }

bool where_has(const Finding& f, const std::string& s) {
  return std::any_of(f.where.begin(), f.where.end(), [&](const std::string& w) { return w.find(s) != std::string::npos; });
}

}  // namespace

TEST_CASE("check: every rule fixture gives exactly its findings") {
  const auto dir = test::testdata() / "check";
  const json expected = test::read_json(dir / "expected.json");
  REQUIRE(expected.size() >= 25);
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string name = it.key();
    CAPTURE(name);
    const CheckResult r = run_checks(MappedFile::open((dir / name).string()), Limits{});
    std::set<std::string> want_ids;
    for (const auto& e : it.value()["findings"]) {
      const std::string id = e["id"];
      want_ids.insert(id);
      CAPTURE(id);
      bool matched = false;
      for (const Finding& f : r.findings) {
        if (f.id != id) continue;
        bool ok = true;
        for (const auto& s : e.value("where_contains", json::array())) ok &= where_has(f, s.get<std::string>());
        for (const auto& s : e.value("where_excludes", json::array())) ok &= !where_has(f, s.get<std::string>());
        matched |= ok;
      }
      CHECK(matched);
    }
    for (const Finding& f : r.findings) {
      if (informational(f.id)) continue;
      CAPTURE(f.message);
      CHECK(want_ids.count(f.id) == 1);  // anything else is a false positive
    }
    if (it.value().value("clean", false)) {
      size_t n = 0;
      for (const Finding& f : r.findings) n += !informational(f.id);
      CHECK(n == 0);
    }
  }
}

TEST_CASE("check: every fixture of the summary tests is free of dangerous globals") {
  for (const auto& f : test::fixtures()) {
    CAPTURE(f.id);
    const CheckResult r = run_checks(f.file.string(), Limits{});
    CHECK(r.read_error.empty());
    for (const Finding& x : r.findings) CHECK(x.id != "dangerous-global");
  }
}

TEST_CASE("check: classification of globals") {
  CHECK(classify_global("collections", "OrderedDict") == GlobalClass::Safe);
  CHECK(classify_global("torch._utils", "_rebuild_tensor_v2") == GlobalClass::Safe);
  CHECK(classify_global("torch", "BFloat16Storage") == GlobalClass::Safe);
  CHECK(classify_global("torch", "float8_e4m3fn") == GlobalClass::Safe);
  CHECK(classify_global("__torch__.torch.nn.modules.linear", "Linear") == GlobalClass::Safe);
  CHECK(classify_global("argparse", "Namespace") == GlobalClass::Unknown);
  CHECK(classify_global("posix", "system") == GlobalClass::Dangerous);
  CHECK(classify_global("builtins", "eval") == GlobalClass::Dangerous);
  CHECK(classify_global("builtins", "getattr") == GlobalClass::Dangerous);
  CHECK(classify_global("torch", "serialization.os.system") == GlobalClass::Dangerous);  // dotted name
  CHECK(classify_global("torch.storage", "_load_from_bytes") == GlobalClass::Dangerous);
  CHECK(classify_global("subprocess", "Popen") == GlobalClass::Dangerous);
}
