// `ckpt diff` against what PyTorch computed for each pair (testdata/gen_formats.py, formats/diff/expected.json):
// keys, renames, dtype changes and float64 max abs / rel differences.
#include <doctest/doctest.h>

#include <cmath>
#include <utility>

#include "core/diff.h"
#include "core/error.h"
#include "core/reader.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

TEST_CASE("diff: pairs computed by PyTorch") {
  const auto dir = test::testdata() / "formats" / "diff";
  const json e = test::read_json(dir / "expected.json");
  const Checkpoint a = read_checkpoint((dir / e["a"].get<std::string>()).string());
  DiffOptions o;
  o.values = true;
  o.atol = e["atol"].get<double>();
  o.rtol = e["rtol"].get<double>();
  REQUIRE(e["pairs"].size() >= 6);
  for (auto it = e["pairs"].begin(); it != e["pairs"].end(); ++it) {
    CAPTURE(it.key());
    const json& p = it.value();
    const Checkpoint b = read_checkpoint((dir / it.key()).string());
    const DiffResult r = diff_checkpoints(a, b, o);
    CHECK(r.keys_equal == p["keys_equal"].get<bool>());
    if (p["prefix"].is_null()) CHECK(r.prefix_op.empty());
    else {
      CHECK(p["prefix"].contains(r.prefix_op));
      if (p["prefix"].contains(r.prefix_op)) CHECK(r.prefix == p["prefix"][r.prefix_op].get<std::string>());
    }
    CHECK(json(r.only_in_a) == p["only_in_a"]);
    CHECK(json(r.only_in_b) == p["only_in_b"]);
    CHECK(r.paired == p["paired"].get<size_t>());
    CHECK(r.compared == p["values_compared"].get<size_t>());
    size_t dtype_changes = 0;
    for (const TensorDiff& d : r.changed) dtype_changes += d.dtype_a != d.dtype_b;
    CHECK(dtype_changes == p["dtype_changed"].size());
    std::vector<std::string> changed_values;
    for (const TensorDiff& d : r.changed)
      if (!d.values_equal) changed_values.push_back(d.a);
    CHECK(changed_values.size() == p["values_changed"].size());
    for (const json& v : p["values_changed"]) {
      const std::string name = v["a"];
      CAPTURE(name);
      const TensorDiff* d = nullptr;
      for (const TensorDiff& x : r.changed)
        if (x.a == name) d = &x;
      REQUIRE(d != nullptr);
      CHECK(d->max_abs == doctest::Approx(v["max_abs_diff"].get<double>()).epsilon(1e-12));
      CHECK(d->max_rel == doctest::Approx(v["max_rel_diff"].get<double>()).epsilon(1e-12));
      CHECK(d->within == v["within_atol"].get<bool>());
    }
    CHECK(r.max_abs == doctest::Approx(p["max_abs_diff"].get<double>()).epsilon(1e-12));
    CHECK(r.equal == p["equal"].get<bool>());
    CHECK(r.within_tolerance == p["within_tolerance"].get<bool>());
  }
}

TEST_CASE("diff: --strip-prefix / --add-prefix accept the rename PyTorch's pairing found") {
  const auto dir = test::testdata() / "formats" / "diff";
  const json e = test::read_json(dir / "expected.json");
  const Checkpoint a = read_checkpoint((dir / e["a"].get<std::string>()).string());
  size_t renamed_pairs = 0;
  for (auto it = e["pairs"].begin(); it != e["pairs"].end(); ++it) {
    CAPTURE(it.key());
    const json& p = it.value();
    const Checkpoint b = read_checkpoint((dir / it.key()).string());
    DiffOptions plain;
    plain.values = true;
    plain.atol = e["atol"].get<double>();
    // Without renaming, the hint names the flag exactly when PyTorch's definition pairs through a prefix.
    const DiffResult r0 = diff_checkpoints(a, b, plain);
    if (p["prefix"].is_null()) {
      CHECK(r0.hint_strip_prefix.empty());
      continue;
    }
    ++renamed_pairs;
    REQUIRE(p["prefix"].contains("b_adds"));
    const std::string prefix = p["prefix"]["b_adds"];
    CHECK(r0.hint_strip_prefix == prefix);
    CHECK(r0.equal == p["equal"].get<bool>());
    // --strip-prefix works in either order; --add-prefix renames A's keys to B's.
    DiffOptions strip = plain, add = plain;
    strip.strip_prefix = prefix;
    add.add_prefix = prefix;
    for (const auto& [r, what] :
         {std::pair{diff_checkpoints(a, b, strip), "strip a b"}, std::pair{diff_checkpoints(b, a, strip), "strip b a"},
          std::pair{diff_checkpoints(a, b, add), "add a b"}}) {
      CAPTURE(what);
      CHECK(r.keys_equal);
      CHECK(r.prefix_op.empty());
      CHECK(r.hint_strip_prefix.empty());
      CHECK(r.paired == p["paired"].get<size_t>());
      CHECK(r.only_in_a.empty());
      CHECK(r.only_in_b.empty());
      CHECK(r.equal == p["equal_after_pairing"].get<bool>());
      CHECK(r.within_tolerance == p["within_tolerance_after_pairing"].get<bool>());
    }
    // Adding to B's side instead pairs nothing: the rule is one-sided on purpose.
    const DiffResult wrong = diff_checkpoints(b, a, add);
    CHECK_FALSE(wrong.equal);
  }
  CHECK(renamed_pairs >= 1);
}

TEST_CASE("diff: renaming two keys of one file to the same name is a usage error") {
  const auto dir = test::testdata() / "formats" / "diff";
  const Checkpoint a = read_checkpoint((dir / "a.pt").string());
  Checkpoint twice = read_checkpoint((dir / "a.pt").string());
  REQUIRE(!twice.tensors.empty());
  Tensor extra = twice.tensors.front();
  extra.name = "_orig_mod." + extra.name;
  twice.tensors.push_back(extra);
  DiffOptions o;
  CHECK_NOTHROW(diff_checkpoints(twice, a, o));
  o.strip_prefix = "_orig_mod.";
  CHECK_THROWS_AS(diff_checkpoints(twice, a, o), UsageError);
  CHECK_THROWS_AS(diff_checkpoints(a, twice, o), UsageError);
}
