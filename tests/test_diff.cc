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

// ---- metadata, ties, --ignore-dtype (testdata/gen_diff_meta.py, diff_meta/expected.json: torch 2.14) ----

namespace {

const MetaChange* change_at(const DiffResult& r, const std::string& path) {
  for (const MetaChange& m : r.metadata)
    if (m.path == path) return &m;
  return nullptr;
}

json meta_dir_expected() { return test::read_json(test::testdata() / "diff_meta" / "expected.json"); }

}  // namespace

TEST_CASE("diff: a Lightning checkpoint further on differs in its metadata, not its weights") {
  const auto dir = test::testdata() / "diff_meta";
  const json e = meta_dir_expected()["fit_later.ckpt"];
  const Checkpoint a = read_checkpoint((dir / "fit.ckpt").string());
  const Checkpoint b = read_checkpoint((dir / "fit_later.ckpt").string());
  DiffOptions o;
  o.values = true;
  const DiffResult r = diff_checkpoints(a, b, o);
  REQUIRE(e["weights_equal"].get<bool>());
  CHECK(r.equal);  // the tensors alone
  CHECK(r.within_tolerance);
  CHECK(r.metadata_compared);
  CHECK(r.metadata_present);
  for (const auto& [path, key] : {std::pair{"epoch", "epoch"}, std::pair{"global_step", "global_step"},
                                  std::pair{"hyper_parameters.lr", "hyper_parameters_lr"},
                                  std::pair{"optimizer_states[0].param_groups[0].lr", "param_group_lr"},
                                  std::pair{"lr_schedulers[0].state.last_epoch", "scheduler_last_epoch"}}) {
    CAPTURE(path);
    const MetaChange* m = change_at(r, path);
    REQUIRE(m != nullptr);
    CHECK(m->in_a);
    CHECK(m->in_b);
    CHECK(m->a == e[key][0]);
    CHECK(m->b == e[key][1]);
  }
  size_t loops = 0;
  for (const MetaChange& m : r.metadata) loops += m.section == "loops";
  CHECK(loops == e["loops_leaves_changed"].get<size_t>());
  const MetaChange* st = change_at(r, "tensors outside the model");
  REQUIRE(st != nullptr);
  CHECK(st->section == "optimizer_state");
  CHECK(st->a["storages"] == e["outside_storages"]);
  CHECK(st->values_changed == e["outside_storages_changed"].get<size_t>());
  CHECK(st->max_abs == doctest::Approx(e["outside_max_abs_diff"].get<double>()).epsilon(1e-12));
  CHECK_FALSE(st->within);
  CHECK(r.verdict(o) == DiffVerdict::Different);
  CHECK_FALSE(r.same(o));
  // --ignore-metadata: the tensors alone, which are the same.
  DiffOptions t = o;
  t.ignore_metadata = true;
  const DiffResult rt = diff_checkpoints(a, b, t);
  CHECK_FALSE(rt.metadata_compared);
  CHECK(rt.metadata.empty());
  CHECK(rt.verdict(t) == DiffVerdict::Same);
  // A file against itself: no metadata change at all.
  const DiffResult self = diff_checkpoints(a, a, o);
  CHECK(self.metadata.empty());
  CHECK(self.verdict(o) == DiffVerdict::Same);
}

TEST_CASE("diff: optimizer state compared by dtype and size, and with --values by value") {
  const auto dir = test::testdata() / "diff_meta";
  const json e = meta_dir_expected()["fit_optstate.ckpt"];
  const Checkpoint a = read_checkpoint((dir / "fit.ckpt").string());
  const Checkpoint b = read_checkpoint((dir / "fit_optstate.ckpt").string());
  DiffOptions o;
  const DiffResult shapes = diff_checkpoints(a, b, o);
  CHECK(shapes.metadata.empty());  // same dtypes and sizes: no difference without --values
  CHECK(shapes.verdict(o) == DiffVerdict::Same);
  o.values = true;
  const DiffResult values = diff_checkpoints(a, b, o);
  REQUIRE(values.metadata.size() == 1);
  const MetaChange& m = values.metadata[0];
  CHECK(m.section == "optimizer_state");
  CHECK(m.values_changed == e["outside_storages_changed"].get<size_t>());
  CHECK(m.max_abs == doctest::Approx(e["outside_max_abs_diff"].get<double>()).epsilon(1e-12));
  CHECK(values.verdict(o) == DiffVerdict::Different);
  // Within --atol, the change is within tolerance: exit 0, verdict "within tolerance".
  o.atol = 1.0;
  const DiffResult loose = diff_checkpoints(a, b, o);
  REQUIRE(loose.metadata.size() == 1);
  CHECK(loose.metadata[0].within);
  CHECK(loose.verdict(o) == DiffVerdict::WithinTolerance);
}

TEST_CASE("diff: a tied copy one side dropped is 'tied', not 'only in A'") {
  const auto td = test::testdata();
  const json ex = meta_dir_expected();
  const Checkpoint st = read_checkpoint((td / "hf211" / "gpt2_tiny").string());
  for (const char* name : {"gpt2_bin", "gpt2_untied_bin"}) {
    CAPTURE(name);
    const json& e = ex[name];
    const Checkpoint bin = read_checkpoint((td / "diff_meta" / name).string());
    DiffOptions o;
    o.values = true;
    for (const bool bin_first : {true, false}) {
      CAPTURE(bin_first);
      const DiffResult r = bin_first ? diff_checkpoints(bin, st, o) : diff_checkpoints(st, bin, o);
      CHECK(r.paired == e["paired"].get<size_t>());
      CHECK(r.differ == 0);  // every shared key holds the same values (torch.equal)
      REQUIRE(e["shared_keys_equal"].get<bool>());
      std::vector<std::string> tied_names, only = bin_first ? r.only_in_a : r.only_in_b;
      for (const TiedDrop& t : r.tied) {
        tied_names.push_back(t.name);
        CHECK(t.side == (bin_first ? 'a' : 'b'));
        CHECK(e["tied"].contains(t.name));
        if (e["tied"].contains(t.name)) CHECK(t.tied_to == e["tied"][t.name].get<std::string>());
      }
      CHECK(tied_names.size() == e["tied"].size());
      std::vector<std::string> missing;  // keys safetensors did not save that are not tied
      for (const json& k : e["keys_not_in_safetensors"])
        if (!e["tied"].contains(k.get<std::string>())) missing.push_back(k);
      CHECK(only == missing);
      CHECK((bin_first ? r.only_in_b : r.only_in_a).empty());
      CHECK(r.metadata.empty());  // the same config.json beside both
      CHECK(r.verdict(o) == (missing.empty() ? DiffVerdict::Same : DiffVerdict::Different));
    }
  }
}

TEST_CASE("diff: --ignore-dtype compares as torch.testing.assert_close(check_dtype=False)") {
  const auto td = test::testdata();
  const json ex = meta_dir_expected();
  const json& e = ex["a_bf16.pt"];
  const Checkpoint a = read_checkpoint((td / "formats" / "diff" / "a.pt").string());
  const Checkpoint b = read_checkpoint((td / "diff_meta" / "a_bf16.pt").string());
  for (auto it = e["assert_close_check_dtype_false_rtol0"].begin(); it != e["assert_close_check_dtype_false_rtol0"].end(); ++it) {
    DiffOptions o;
    o.values = true;
    o.atol = std::stod(it.key());
    CAPTURE(o.atol);
    const DiffResult strict = diff_checkpoints(a, b, o);
    CHECK(strict.verdict(o) == DiffVerdict::Different);  // a dtype change is a difference without the flag
    o.ignore_dtype = true;
    const DiffResult r = diff_checkpoints(a, b, o);
    CHECK(r.same(o) == it.value().get<bool>());
    size_t dtype_changes = 0;
    for (auto t = e["tensors"].begin(); t != e["tensors"].end(); ++t) dtype_changes += t.value()["dtype_a"] != t.value()["dtype_b"];
    CHECK(r.dtype_ignored == dtype_changes);
    for (const TensorDiff& d : r.changed) {
      CAPTURE(d.a);
      const json& t = e["tensors"][d.a];
      CHECK(d.max_abs == doctest::Approx(t["max_abs_diff"].get<double>()).epsilon(1e-12));
      CHECK(d.max_rel == doctest::Approx(t["max_rel_diff"].get<double>()).epsilon(1e-12));
    }
  }
  // Integers against a float16 / bfloat16 cast: promoted to the float dtype, they round to the same values.
  const json& ih = ex["ints_half.pt"];
  const Checkpoint ia = read_checkpoint((td / "diff_meta" / "ints.pt").string());
  const Checkpoint ib = read_checkpoint((td / "diff_meta" / "ints_half.pt").string());
  DiffOptions o;
  o.values = true;
  o.ignore_dtype = true;
  const DiffResult r = diff_checkpoints(ia, ib, o);
  for (auto it = ih["assert_close_check_dtype_false_exact"].begin(); it != ih["assert_close_check_dtype_false_exact"].end(); ++it) {
    CAPTURE(it.key());
    bool differs = false;
    for (const TensorDiff& d : r.changed)
      if (d.a == it.key()) differs = d.differs;
    CHECK(differs == !it.value().get<bool>());
  }
  o.ignore_dtype = false;
  const DiffResult plain = diff_checkpoints(ia, ib, o);
  for (const TensorDiff& d : plain.changed) {
    CAPTURE(d.a);
    CHECK(d.values_equal == ih["float64_equal"][d.a].get<bool>());  // in float64 they are not equal
  }
}

TEST_CASE("diff: a prefix that renames nothing is a warning") {
  const auto dir = test::testdata() / "formats" / "diff";
  const Checkpoint a = read_checkpoint((dir / "a.pt").string());
  const Checkpoint r = read_checkpoint((dir / "renamed.pt").string());
  DiffOptions o;
  o.strip_prefix = "nothing.";
  const DiffResult w = diff_checkpoints(a, a, o);
  REQUIRE(w.warnings.size() == 1);
  CHECK(w.warnings[0] == "--strip-prefix 'nothing.' matches no key in A or B");
  o.strip_prefix = "_orig_mod.";
  CHECK(diff_checkpoints(a, r, o).warnings.empty());
  DiffOptions add;
  add.add_prefix = "model.";
  const DiffResult wa = diff_checkpoints(a, r, add);
  REQUIRE(wa.warnings.size() == 1);
  CHECK(wa.warnings[0] == "--add-prefix 'model.' gives no key of A a partner in B");
  add.add_prefix = "_orig_mod.";
  CHECK(diff_checkpoints(a, r, add).warnings.empty());
}
