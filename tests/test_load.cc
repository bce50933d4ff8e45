// The LibTorch-free half of `ckpt load` (src/core/storage.cc, values.cc, keys.cc) against PyTorch's
// numbers in testdata/load/expected.json (testdata/gen_load.py): CRC-32 of every tensor's values, NaN/Inf
// counts as torch.isnan / torch.isinf give them, storage bounds, and key matching as load_state_dict
// reports it. These run in the sanitizer build too; tests/cli/load_cases.py runs the same numbers
// through ckpt-torch.
#include <doctest/doctest.h>

#include <cstring>

#include "core/keys.h"
#include "core/reader.h"
#include "core/storage.h"
#include "core/values.h"
#include "fixtures.h"

using nlohmann::json;
using namespace ckpt;

TEST_CASE("load: CRC-32 and NaN/Inf of every materialized tensor equal PyTorch's") {
  const json e = test::read_json(test::testdata() / "load" / "expected.json");
  size_t tensors = 0;
  for (const json& c : e["loads"]) {
    CAPTURE(c["file"].get<std::string>());
    const Checkpoint ck = read_checkpoint((test::testdata() / c["file"].get<std::string>()).string());
    StorageIndex index(ck);
    for (const Tensor& t : ck.tensors) {
      if (!c["tensors"].contains(t.name)) {
        CHECK(c["not_materialized"].contains(t.name));
        continue;
      }
      CAPTURE(t.name);
      const json& w = c["tensors"][t.name];
      const Storage* s = index.find(t.storage);
      REQUIRE(s);
      checked_extent(ck, t, *s);
      const ByteView b = index.bytes(*s);
      CHECK(tensor_crc32(t, b.data()) == w["crc32"].get<uint32_t>());
      const ValueStats v = tensor_nonfinite(t, b.data());
      CHECK(v.nan == w["nan"].get<uint64_t>());
      CHECK(v.inf == w["inf"].get<uint64_t>());
      ++tensors;
    }
  }
  CHECK(tensors > 200);
}

TEST_CASE("load: a view past its storage is refused naming the tensor and the member") {
  const Checkpoint ck = read_checkpoint((test::testdata() / "load" / "nan_inf.pt").string());
  StorageIndex index(ck);
  Tensor t = ck.tensors.front();
  const Storage* s = index.find(t.storage);
  REQUIRE(s);
  t.offset = static_cast<int64_t>(s->numel);  // one element past the end
  try {
    checked_extent(ck, t, *s);
    FAIL("no error");
  } catch (const InputError& err) {
    CHECK(err.render().find("nan_inf.pt: nan_inf/data/") != std::string::npos);
    CHECK(err.render().find("tensor '" + t.name + "'") != std::string::npos);
  }
  t.offset = 0;
  t.stride[0] = INT64_MAX / 2;  // overflowing extent
  CHECK_THROWS_AS(checked_extent(ck, t, *s), InputError);
}

TEST_CASE("load: non-finite counts per dtype bit pattern") {
  const uint16_t half[] = {0x7c00, 0xfc00, 0x7e00, 0x3c00, 0x7c01};  // +inf -inf nan 1 nan
  ValueStats v = count_nonfinite(*dtype_by_name("float16"), reinterpret_cast<const uint8_t*>(half), 5);
  CHECK(v.inf == 2);
  CHECK(v.nan == 2);
  const uint16_t bf[] = {0x7f80, 0x7fc0, 0x3f80};
  v = count_nonfinite(*dtype_by_name("bfloat16"), reinterpret_cast<const uint8_t*>(bf), 3);
  CHECK(v.inf == 1);
  CHECK(v.nan == 1);
  const uint8_t e4m3[] = {0x7f, 0xff, 0x7e};  // nan, -nan, 448
  v = count_nonfinite(*dtype_by_name("float8_e4m3fn"), e4m3, 3);
  CHECK(v.nan == 2);
  CHECK(v.inf == 0);
  const int64_t ints[] = {-1, 0x7ff0000000000000};
  v = count_nonfinite(*dtype_by_name("int64"), reinterpret_cast<const uint8_t*>(ints), 2);
  CHECK(v.nan + v.inf == 0);
}

TEST_CASE("load: key matching equals load_state_dict against the TorchScript architecture") {
  const json e = test::read_json(test::testdata() / "load" / "expected.json");
  REQUIRE(e["matches"].size() >= 6);
  for (const json& m : e["matches"]) {
    const std::string strip = m.value("strip_prefix", "");
    CAPTURE(m["file"].get<std::string>());
    CAPTURE(strip);
    const Checkpoint f = read_checkpoint((test::testdata() / m["file"].get<std::string>()).string());
    const Checkpoint a = read_checkpoint((test::testdata() / m["model"].get<std::string>()).string());
    std::vector<const Tensor*> fk, mk;
    for (const Tensor& t : f.tensors) fk.push_back(&t);
    for (const Tensor& t : a.tensors) mk.push_back(&t);
    const KeyMatch r = match_keys(fk, mk, strip, "");
    CHECK(json(r.missing) == m["missing"]);
    CHECK(json(r.unexpected) == m["unexpected"]);
    std::vector<std::string> mm;
    for (const KeyMismatch& x : r.mismatched) mm.push_back(x.key);
    CHECK(json(mm) == m["mismatched"]);
    CHECK((r.suggested_strip_prefix ? json(*r.suggested_strip_prefix) : json(nullptr)) == m["suggested_strip_prefix"]);
    CHECK((r.suggested_add_prefix ? json(*r.suggested_add_prefix) : json(nullptr)) == m["suggested_add_prefix"]);
  }
}

TEST_CASE("load: --add-prefix is suggested when FILE lacks the model's wrapper prefix") {
  // The architecture's keys seen from the other side: FILE = arch.pt's own keys, model = the prefixed file.
  const Checkpoint plain = read_checkpoint((test::testdata() / "load" / "sd_exact.pt").string());
  const Checkpoint prefixed = read_checkpoint((test::testdata() / "load" / "sd_module.pt").string());
  std::vector<const Tensor*> fk, mk;
  for (const Tensor& t : plain.tensors) fk.push_back(&t);
  for (const Tensor& t : prefixed.tensors) mk.push_back(&t);
  KeyMatch r = match_keys(fk, mk, "", "");
  REQUIRE(r.suggested_add_prefix);
  CHECK(*r.suggested_add_prefix == "module.");
  CHECK(!r.suggested_strip_prefix);
  r = match_keys(fk, mk, "", "module.");
  CHECK(r.ok());
  CHECK(renamed_key("_orig_mod.a.b", "_orig_mod.", "") == "a.b");
  CHECK(renamed_key("a.b", "_orig_mod.", "model.") == "model.a.b");
}

TEST_CASE("load: DCP tensors assembled from their chunks equal torch 2.6's, 2.14's and 2.15's values") {
  size_t checked = 0;
  for (const char* set : {"t26", "t214", "t215"}) {
    const json e = test::read_json(test::testdata() / set / "load_expected.json");
    for (const json& c : e["loads"]) {
      const std::string file = c["file"].get<std::string>();
      if (file.rfind("formats/dcp", 0) != 0 && file.find("/dcp") == std::string::npos) continue;
      CAPTURE(file);
      const Checkpoint ck = read_checkpoint((test::testdata() / file).string());
      StorageIndex index(ck);
      for (const Tensor& t : ck.tensors) {
        CAPTURE(t.name);
        REQUIRE(c["tensors"].contains(t.name));
        const Storage* s = index.find(t.storage);
        REQUIRE(s);
        CHECK(!s->dcp->chunks.empty());
        const ByteView b = index.bytes(*s);
        CHECK(tensor_crc32(t, b.data()) == c["tensors"][t.name]["crc32"].get<uint32_t>());
        ++checked;
      }
    }
  }
  CHECK(checked == 55);  // formats/dcp, formats/dcp_2rank (torch 2.6), t26/dcp, t214/dcp, t215/dcp: 11 tensors each
}
