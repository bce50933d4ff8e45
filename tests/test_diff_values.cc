// `ckpt diff --values` on threads and typed loops (core/value_diff.h) against two truths: what PyTorch
// computed for every dtype, view and special value (testdata/gen_diff_values.py,
// formats/diff_values/expected.json), and a plain per-element walk through element_value (the
// definition, as diff compared before) on the real fixture sets, at several thread counts and piece
// sizes so big tensors are split and merged.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>

#include "core/diff.h"
#include "core/reader.h"
#include "core/storage.h"
#include "core/value_diff.h"
#include "core/values.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

namespace {

// The per-element definition (README "ckpt diff"), one element_value call per element.
ValueDiff reference(const Tensor& a, const uint8_t* pa, const Tensor& b, const uint8_t* pb, double atol, double rtol) {
  ValueDiff d;
  const bool comparable = numeric(a.dtype) && numeric(b.dtype);
  if (!comparable && a.dtype != b.dtype) return {0.0, 0.0, false, false};
  std::vector<uint64_t> offs_b;
  for_each_element(b, [&](uint64_t off) { offs_b.push_back(off); });
  size_t k = 0;
  for_each_element(a, [&](uint64_t off) {
    const uint64_t ob = offs_b[k++];
    if (!comparable) {
      if (std::memcmp(pa + off, pb + ob, a.dtype->itemsize) != 0) d.equal = d.within = false;
      return;
    }
    const double x = *element_value(*a.dtype, pa + off), y = *element_value(*b.dtype, pb + ob);
    if (x == y || (std::isnan(x) && std::isnan(y))) return;
    d.equal = false;
    const double diff = std::fabs(x - y);
    if (!(diff <= atol + rtol * std::fabs(y) && std::isfinite(diff))) d.within = false;  // torch.isclose
    if (std::isnan(diff) || diff > d.max_abs) d.max_abs = std::isnan(diff) ? INFINITY : diff;
    if (y != 0 && diff / std::fabs(y) > d.max_rel) d.max_rel = diff / std::fabs(y);
  });
  return d;
}

const uint8_t* bytes_of(const Tensor& t, const StorageIndex& index) {
  const Storage* s = index.find(t.storage);
  return s && s->present ? index.bytes(*s).data() : nullptr;
}

double number(const json& j) { return j.is_null() ? INFINITY : j.get<double>(); }

// Every way the work can be cut: one thread, several, pieces smaller than a row, the default.
// The baseline (SSE2) loop as well as the widest the CPU has.
// Windows of a few bytes too (PageWindow): a strided pair read a few elements at a time.
struct Cut {
  unsigned threads;
  uint64_t piece;
  bool wide = true;
  uint64_t window = 0;
};
constexpr Cut kCuts[] = {{1, 8ull << 20},     {2, 64},
                         {3, 1000},           {4, 1},
                         {2, 8ull << 20},     {1, 8ull << 20, false},
                         {2, 100, false},     {1, 8ull << 20, true, 24},
                         {3, 1000, true, 100}};

const TensorDiff* find(const DiffResult& r, const std::string& name) {
  for (const TensorDiff& d : r.changed)
    if (d.a == name) return &d;
  return nullptr;
}

}  // namespace

TEST_CASE("diff --values: float16 converts exactly as element_value does, all 65536 of them") {
  const DType* f16 = dtype_by_name("float16");
  REQUIRE(f16);
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    uint8_t raw[2];
    std::memcpy(raw, &bits, 2);
    const double want = *element_value(*f16, raw), got = half_bits_to_float(bits);
    if (std::isnan(want)) CHECK(std::isnan(got));
    else {
      CAPTURE(h);
      CHECK(std::signbit(got) == std::signbit(want));
      CHECK(got == want);
    }
  }
}

TEST_CASE("diff --values: every dtype, view and special value as PyTorch computes it, however the work is cut") {
  const auto dir = test::testdata() / "formats" / "diff_values";
  const json e = test::read_json(dir / "expected.json");
  const Checkpoint a = read_checkpoint((dir / "a.pt").string()), b = read_checkpoint((dir / "b.pt").string());
  REQUIRE(a.tensors.size() == e["tensors"].size());
  size_t non_contiguous = 0, checked = 0;
  for (const auto& [name, t] : e["tensors"].items())
    non_contiguous += !t["contiguous_a"].get<bool>() || !t["contiguous_b"].get<bool>();
  CHECK(non_contiguous >= 5);
  for (size_t k = 0; k < e["tolerances"].size(); ++k) {
    DiffOptions o;
    o.values = true;
    o.atol = e["tolerances"][k][0].get<double>();
    o.rtol = e["tolerances"][k][1].get<double>();
    for (const Cut& cut : kCuts) {
      CAPTURE(o.atol);
      CAPTURE(o.rtol);
      CAPTURE(cut.threads);
      CAPTURE(cut.piece);
      o.threads = cut.threads;
      o.piece_bytes = cut.piece;
      o.wide_simd = cut.wide;
      o.window_bytes = cut.window;
      const DiffResult r = diff_checkpoints(a, b, o);
      CHECK(r.compared == a.tensors.size());
      bool all_within = true;
      double max_abs = 0;
      for (const auto& [name, t] : e["tensors"].items()) {
        CAPTURE(name);
        const json& want = t["results"][k];
        const TensorDiff* d = find(r, name);
        const bool dtype_change = t["dtype_a"] != t["dtype_b"];
        // (a pair may also be listed for a tie that only A has: a.pt holds bool and bool.equal, and c64,
        // c64.equal and c64_vs_c128, as one tensor each; b.pt does not)
        const bool listed_for_values = d != nullptr && (!d->tie_changed || d->dtype_a != d->dtype_b || !d->values_equal);
        CHECK(listed_for_values == (dtype_change || !want["equal"].get<bool>()));
        all_within = all_within && want["within"].get<bool>() && !dtype_change;
        max_abs = std::max(max_abs, number(want["max_abs_diff"]));
        if (!d) continue;
        ++checked;
        CHECK(d->compared);
        CHECK(d->comparable == t["numeric"].get<bool>());
        CHECK(d->values_equal == want["equal"].get<bool>());
        CHECK(d->within == want["within"].get<bool>());
        CHECK(d->max_abs == number(want["max_abs_diff"]));  // exact: the same float64 arithmetic
        CHECK(d->max_rel == number(want["max_rel_diff"]));
      }
      CHECK(r.within_tolerance == all_within);
      CHECK(r.max_abs == max_abs);
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("diff --values: threaded typed loops equal the per-element reference on the fixture sets") {
  // Pairs with tensors in common: each generator's files against the same names from other torch
  // versions, the diff fixtures, and the diff_values pair, at tolerances that make some pairs close.
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> pairs;
  const auto root = test::testdata();
  for (const char* set : {"t26", "t214", "t215"})
    for (const auto& f : std::filesystem::directory_iterator(root / "t113"))
      if (f.path().extension() == ".pt" && std::filesystem::exists(root / set / f.path().filename()))
        pairs.emplace_back(f.path(), root / set / f.path().filename());
  for (const char* b : {"same.pt", "values.pt", "dtype.pt", "a.safetensors"})
    pairs.emplace_back(root / "formats" / "diff" / "a.pt", root / "formats" / "diff" / b);
  pairs.emplace_back(root / "formats" / "diff_values" / "a.pt", root / "formats" / "diff_values" / "b.pt");
  pairs.emplace_back(root / "formats" / "diff_values" / "b.pt", root / "formats" / "diff_values" / "a.pt");
  size_t compared = 0, differing = 0;
  for (const auto& [pa, pb] : pairs) {
    CAPTURE(pa.string());
    CAPTURE(pb.string());
    Checkpoint a, b;
    try {
      a = read_checkpoint(pa.string());
      b = read_checkpoint(pb.string());
    } catch (const std::exception&) {
      continue;  // files summary refuses (their own tests say why)
    }
    const StorageIndex ia(a), ib(b);
    std::map<std::string, const Tensor*> by_name;
    for (const Tensor& t : b.tensors) by_name[t.name] = &t;
    for (const auto& [atol, rtol] : {std::pair{0.0, 0.0}, std::pair{1e-3, 1e-2}}) {
      for (const Cut& cut : kCuts) {
        DiffOptions o;
        o.values = true;
        o.atol = atol;
        o.rtol = rtol;
        o.threads = cut.threads;
        o.piece_bytes = cut.piece;
        o.wide_simd = cut.wide;
        o.window_bytes = cut.window;
        const DiffResult r = diff_checkpoints(a, b, o);
        for (const Tensor& ta : a.tensors) {
          auto it = by_name.find(ta.name);
          if (it == by_name.end()) continue;
          const Tensor& tb = *it->second;
          if (ta.shape != tb.shape || ta.layout != Layout::Strided || tb.layout != Layout::Strided || !ta.dtype || !tb.dtype ||
              ta.state != TensorState::Materialized || tb.state != TensorState::Materialized)
            continue;
          const uint8_t *xa = bytes_of(ta, ia), *xb = bytes_of(tb, ib);
          if (!xa || !xb) continue;
          CAPTURE(ta.name);
          const ValueDiff want = reference(ta, xa, tb, xb, atol, rtol);
          ++compared;
          const TensorDiff* d = find(r, ta.name);
          if (!d) {
            CHECK(want.equal);
            continue;
          }
          differing += !want.equal;
          CHECK(d->values_equal == want.equal);
          CHECK(d->within == want.within);
          CHECK(d->max_abs == want.max_abs);
          CHECK(d->max_rel == want.max_rel);
        }
      }
    }
  }
  CHECK(compared > 500);
  CHECK(differing > 50);
}

TEST_CASE("diff --values: progress reaches the total from the calling thread") {
  const auto dir = test::testdata() / "formats" / "diff_values";
  const Checkpoint a = read_checkpoint((dir / "a.pt").string()), b = read_checkpoint((dir / "b.pt").string());
  uint64_t expect = 0;
  for (size_t k = 0; k < a.tensors.size(); ++k)
    if (a.tensors[k].dtype->name != "complex64" || b.tensors[k].dtype->name != "complex128")  // not read
      expect += a.tensors[k].bytes + b.tensors[k].bytes;
  const std::thread::id caller = std::this_thread::get_id();
  for (const Cut& cut : kCuts) {
    DiffOptions o;
    o.values = true;
    o.threads = cut.threads;
    o.piece_bytes = cut.piece;
    uint64_t last = 0, total = 0;
    bool other_thread = false, backwards = false;
    o.progress = [&](uint64_t done, uint64_t all) {
      other_thread = other_thread || std::this_thread::get_id() != caller;
      backwards = backwards || done < last;
      last = done;
      total = all;
    };
    diff_checkpoints(a, b, o);
    CHECK_FALSE(other_thread);
    CHECK_FALSE(backwards);
    CHECK(total == expect);
    CHECK(last == total);
  }
}

TEST_CASE("value_diff: round_to_dtype rounds as torch's casts do") {
  const json e = test::read_json(test::testdata() / "diff_meta" / "expected.json")["casts"];
  for (const char* dtype : {"float32", "float16", "bfloat16"}) {
    for (size_t k = 0; k < e["inputs"].size(); ++k) {
      const double x = e["inputs"][k].get<double>();
      const json& want = e[dtype][k];
      const double w = want.is_string() ? (want.get<std::string>() == "inf" ? INFINITY : -INFINITY) : want.get<double>();
      CAPTURE(dtype);
      CAPTURE(x);
      CHECK(round_to_dtype(x, dtype) == w);
    }
  }
  CHECK(round_to_dtype(0.1, "float64") == 0.1);
}
