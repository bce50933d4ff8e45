// safetensors and sharded checkpoints that must be refused, each with the reason the reference
// implementation (or the index) gives; see testdata/formats/reference.json for what huggingface's own
// library says about each (it accepts the duplicate-key file, keeping the last key; ckpt refuses it).
#include <doctest/doctest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "core/hf_config.h"
#include "core/reader.h"
#include "core/storage.h"
#include "core/tar.h"
#include "fixtures.h"

using namespace ckpt;

TEST_CASE("formats: hostile safetensors and broken sharded indexes are refused with the reason") {
  size_t n = 0;
  const auto dir = test::testdata() / "formats";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.size() < 14 || name.substr(name.size() - 14) != ".expected.json") continue;
    const auto j = test::read_json(e.path());
    if (!j.contains("error_contains")) continue;
    ++n;
    CAPTURE(name);
    std::string error;
    try {
      (void)read_checkpoint((dir / j["fixture"].get<std::string>()).string());
    } catch (const InputError& err) { error = err.render(); }
    CAPTURE(error);
    REQUIRE(!error.empty());
    CHECK(error.find(j["error_contains"].get<std::string>()) != std::string::npos);
    CHECK(error.find('\n') == std::string::npos);
  }
  CHECK(n >= 12);
}

// testdata/gen_permissive.py: files torch.load accepts although torch.save never writes them so (bytes
// after a zip, repeated or differently cased zip names, the legacy magic number in other encodings, the
// tar format of torch <= 0.1.9, containers holding themselves), and their near misses torch refuses. For
// each, expected.json holds what torch 1.13 and 2.6 did, and what ckpt must do: read the tensors torch
// returned (names in order, dtype, shape, numel, bytes, and the values' bytes), or refuse with one line.
namespace {

std::string hex_of(const uint8_t* p, uint64_t n) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (uint64_t k = 0; k < n; ++k) {
    out += d[p[k] >> 4];
    out += d[p[k] & 15];
  }
  return out;
}

// The tensor's elements in row-major order, gathered through its strides (fixtures are small).
std::string tensor_bytes(const Checkpoint& ck, const Tensor& t) {
  StorageIndex index(ck);
  const Storage* s = index.find(t.storage);
  REQUIRE(s != nullptr);
  const ByteView bytes = index.bytes(*s);
  const uint64_t item = t.dtype->itemsize;
  std::string out;
  std::vector<int64_t> at(t.shape.size(), 0);
  for (int64_t n = 0; n < t.numel; ++n) {
    int64_t off = t.offset;
    for (size_t d = 0; d < at.size(); ++d) off += at[d] * t.stride[d];
    const ByteView one = bytes.sub(static_cast<uint64_t>(off) * item, item);
    out.append(reinterpret_cast<const char*>(one.data()), item);
    for (size_t d = at.size(); d-- > 0;) {
      if (++at[d] < t.shape[d]) break;
      at[d] = 0;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("permissive: ckpt reads what torch.load reads and refuses what it refuses") {
  const auto dir = test::testdata() / "permissive";
  const auto expected = test::read_json(dir / "expected.json");
  size_t read = 0, refused = 0, pending = 0;
  for (const auto& item : expected.at("fixtures").items()) {
    const std::string name = item.key();  // not a structured binding: clang 14 cannot capture one
    const auto& e = item.value();
    CAPTURE(name);
    const auto& want = e.at("ckpt");
    std::string error;
    Checkpoint ck;
    try {
      ck = read_checkpoint((dir / name).string());
    } catch (const InputError& err) { error = err.render(); }
    CAPTURE(error);
    if (want.contains("pending")) {  // torch reads it; ckpt cannot until the change named there is made
      ++pending;
      CHECK(!error.empty());
      continue;
    }
    if (!want.at("accepted").get<bool>()) {
      ++refused;
      CHECK(!error.empty());
      CHECK(error.find('\n') == std::string::npos);
      if (want.contains("error_contains")) CHECK(error.find(want["error_contains"].get<std::string>()) != std::string::npos);
      continue;
    }
    ++read;
    REQUIRE(error.empty());
    const auto& tensors = want.at("tensors");
    REQUIRE(ck.tensors.size() == tensors.size());
    for (size_t k = 0; k < tensors.size(); ++k) {
      const Tensor& t = ck.tensors[k];
      const auto& w = tensors[k];
      CAPTURE(w.dump());
      CHECK(t.name == w.at("name").get<std::string>());
      REQUIRE(t.dtype != nullptr);
      CHECK(std::string(t.dtype->name) == w.at("dtype").get<std::string>());
      CHECK(t.shape == w.at("shape").get<std::vector<int64_t>>());
      CHECK(t.numel == w.at("numel").get<int64_t>());
      CHECK(t.bytes == w.at("bytes").get<uint64_t>());
      const std::string data = tensor_bytes(ck, t);
      CHECK(crc32(0, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size())) ==
            w.at("crc32").get<uint64_t>());
      if (w.contains("hex"))
        CHECK(hex_of(reinterpret_cast<const uint8_t*>(data.data()), data.size()) == w["hex"].get<std::string>());
    }
  }
  CHECK(read >= 50);
  CHECK(refused >= 20);
  MESSAGE(read << " read as torch reads them, " << refused << " refused, " << pending << " pending");
}

TEST_CASE("permissive: a tar checkpoint's pickles, listed for a scanner") {
  const auto dir = test::testdata() / "permissive";
  auto f = MappedFile::open((dir / "tar_state_dict.pt").string());
  REQUIRE(looks_like_tar(f->view()));
  const TarPickles p = torch_tar_pickles(f->view());
  CHECK(p.stopped == "");
  // storages: count, 5 records, the view list; tensors: count, 7 records; pickle: the object
  REQUIRE(p.pickles.size() == 16);
  CHECK(p.pickles.front().member == "storages");
  CHECK(p.pickles[7].member == "tensors");
  CHECK(p.pickles.back().member == "pickle");
  for (const TarPickle& t : p.pickles) {
    Heap heap;
    CHECK(unpickle(t.data, t.start, heap, Limits{}).end == t.end);
  }
  auto cut = MappedFile::from_memory(test::read_file(dir / "tar_truncated.pt"), "cut.pt");
  const TarPickles q = torch_tar_pickles(cut->view());
  CHECK(q.pickles.empty());
  CHECK(q.stopped.find("cut.pt: +0xc7c: tar member 'storages'") == 0);
}

// fuzz_json: nlohmann reports a number too large for a double (1e999) with out_of_range, not parse_error;
// each JSON reader refuses it with its one-line error (or, config.json, records it) instead of letting
// the exception escape.
TEST_CASE("formats: a JSON number out of range is bad input, in a safetensors header, an index and config.json") {
  namespace fs = std::filesystem;
  const std::string h = R"({"w":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})";
  std::string st;
  for (int k = 0; k < 8; ++k) st += static_cast<char>((h.size() >> (8 * k)) & 0xff);
  st += h + std::string(4, '\0');
  try {
    read_checkpoint(MappedFile::from_memory(st, "big.safetensors"));
    FAIL("no error");
  } catch (const InputError& e) { CHECK(std::string(e.what()).find("a number out of range") != std::string::npos); }
  const fs::path dir = fs::path(CKPT_TEST_WORKDIR) / "json_out_of_range";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name, std::ios::binary) << text; };
  write("model.safetensors.index.json", R"({"metadata":{"total_size":1e999},"weight_map":{"w":"model.safetensors"}})");
  try {
    read_checkpoint((dir / "model.safetensors.index.json").string());
    FAIL("no error");
  } catch (const InputError& e) { CHECK(std::string(e.what()).find("a number out of range") != std::string::npos); }
  fs::remove(dir / "model.safetensors.index.json");
  write("model.safetensors", st.substr(0, 8 + h.size()) + std::string(4, '\0'));
  write("config.json", R"({"model_type":"gpt2","vocab_size":1e999})");
  const auto c = read_hf_config(dir.string(), Limits{});
  REQUIRE(c.has_value());
  CHECK(c->error.find("a number out of range") != std::string::npos);
  fs::remove_all(dir);
}
