// Hostile input: every fixture truncated at every length and with bytes flipped must give a clean
// InputError (or a valid result), never a crash, a hang or another exception type. Run under
// -DCKPT_SANITIZE=ON to catch memory errors too.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <string>

#include "core/reader.h"
#include "core/render_summary.h"
#include "core/summary.h"
#include "fixtures.h"

using namespace ckpt;

namespace {

// Under the sanitizers (CKPT_ASAN: scripts/test.sh --sanitize, where every read costs about three times as much)
// the truncation and flip tests take every 4th length or byte, starting at a different place in each file, so
// that the pass stays within CI's time; the ordinary build takes every one.
#ifdef CKPT_ASAN
constexpr size_t kStride = 4;
#else
constexpr size_t kStride = 1;
#endif
size_t first_of(const std::string& id) { return std::hash<std::string>{}(id) % kStride; }

// Returns "" on success, else the rendered error. Any other exception escapes and fails the test.
std::string try_read(const std::string& bytes, const std::string& name) {
  try {
    Checkpoint ck = read_checkpoint(MappedFile::from_memory(bytes, name));
    Summary s = summarize(ck);
    RenderOptions o;
    o.depth = -1;
    (void)render_summary_text(s, o);
    const auto parsed = nlohmann::json::parse(summary_json_text(s));  // always valid JSON
    if (!parsed.is_object()) return "summary JSON is not an object";
    return "";
  } catch (const InputError& e) { return e.render(); }
}

}  // namespace

TEST_CASE("hostile: every fixture truncated at every length gives a clean error") {
  for (const auto& f : test::fixtures()) {
    if (std::filesystem::is_directory(f.file)) continue;  // sharded: each shard is a fixture file of its own format
    // t215 is t214's set written again by torch 2.15 (the same writers and readers): truncating it too would
    // add a third to this test's time (about 8 s here, more under the sanitizers) and cover nothing new.
    if (f.id.rfind("t215/", 0) == 0) continue;
    CAPTURE(f.id);
    const std::string bytes = test::read_file(f.file);
    REQUIRE(try_read(bytes, f.id) == "");
    size_t errors = 0, tried = 0;
    for (size_t len = first_of(f.id); len < bytes.size(); len += kStride) {
      ++tried;
      const std::string msg = try_read(bytes.substr(0, len), f.id);
      if (msg.empty()) continue;
      ++errors;
      CHECK(msg.rfind(f.id + ": ", 0) == 0);  // names the file
      CHECK(msg.find('\n') == std::string::npos);  // one line
    }
    // Legacy streams can end early and still hold a whole prefix of pickles; zips never can.
    CHECK(tried - errors <= 8);
  }
}

// Each flip re-reads the whole file, so this is the suite's longest test: one test case per fixture set,
// so that ctest -j runs them side by side.
static void flip_every_byte(const std::string& set) {
  size_t files = 0;
  for (const auto& f : test::fixtures()) {
    if (f.id.rfind(set + "/", 0) != 0 || std::filesystem::is_directory(f.file)) continue;
    CAPTURE(f.id);
    ++files;
    std::string bytes = test::read_file(f.file);
    for (size_t pos = first_of(f.id); pos < bytes.size(); pos += kStride) {
      bytes[pos] = static_cast<char>(bytes[pos] ^ 0xA5);
      const std::string msg = try_read(bytes, f.id);
      if (!msg.empty()) CHECK(msg.find('\n') == std::string::npos);
      bytes[pos] = static_cast<char>(bytes[pos] ^ 0xA5);
    }
  }
  CHECK(files > 0);
}

// t214 and t215 are t26's set written again by torch 2.14 and 2.15: the same writers and readers, so one torch 2
// set's flips cover them (and would double the sanitizer run). Every set but t215 is still truncated at every
// length above.
TEST_CASE("hostile: every t113 fixture with each byte flipped gives a clean error or a result") { flip_every_byte("t113"); }
TEST_CASE("hostile: every t26 fixture with each byte flipped gives a clean error or a result") { flip_every_byte("t26"); }
TEST_CASE("hostile: every ts113 fixture with each byte flipped gives a clean error or a result") { flip_every_byte("ts113"); }
TEST_CASE("hostile: every formats fixture with each byte flipped gives a clean error or a result") { flip_every_byte("formats"); }

TEST_CASE("hostile: errors name file, member and offset") {
  const auto f = test::testdata() / "t113" / "plain_state_dict.pt";
  std::string bytes = test::read_file(f);
  // Find data.pkl's BINUNICODE of the first key and make its length lie.
  const auto at = bytes.find("plain_state_dict/data.pkl");
  REQUIRE(at != std::string::npos);
  const size_t data = at + std::string("plain_state_dict/data.pkl").size() + static_cast<uint8_t>(bytes[28]) +
                      256 * static_cast<uint8_t>(bytes[29]);
  // Within data.pkl, the first 'X' (BINUNICODE) after the protocol header.
  size_t x = bytes.find('X', data);
  REQUIRE(x != std::string::npos);
  bytes[x + 1] = '\x00';
  bytes[x + 2] = '\x00';
  bytes[x + 3] = '\x00';
  bytes[x + 4] = '\x10';  // 256 MiB: over what remains
  const std::string msg = try_read(bytes, "model.pt");
  CHECK(msg.rfind(fmt::format("model.pt: plain_state_dict/data.pkl+0x{:x}: BINUNICODE: length 268435456 exceeds ", x - data),
                  0) == 0);
}

TEST_CASE("hostile: not a checkpoint") {
  // Text whose first opcode Python would stop at: recognized before any opcode runs.
  CHECK(try_read("hello world, this is text", "notes.txt") ==
        "notes.txt: is text, not a PyTorch checkpoint (it begins 'hello world, this is text')");
  CHECK(try_read("import torch, torch.nn as nn\nx = 1\n", "model.py") ==
        "model.py: is text, not a PyTorch checkpoint (it begins 'import torch, torch.nn as nn')");
  CHECK(try_read("class Net:\n    pass\n", "net.py") == "net.py: is text, not a PyTorch checkpoint (it begins 'class Net:')");
  CHECK(try_read("# notes\n", "notes.md") == "notes.md: is text, not a PyTorch checkpoint (it begins '# notes')");
  // A binary file that starts no format, and a printable file that could be a protocol-0 pickle.
  CHECK(try_read(std::string("\x01\x02\x03", 3), "blob.bin") ==
        "blob.bin: +0x0: not a PyTorch checkpoint (first byte 0x01 starts no known format)");
  CHECK(try_read("Model notes\n", "m.txt").find("is text") == std::string::npos);  // 'M': BININT2, read on
  CHECK_FALSE(looks_like_text(MappedFile::from_memory("cposix\nsystem\n(S'x'\ntR.", "p.pkl")->view()));
  CHECK(looks_like_text(MappedFile::from_memory("iposix\nsystem\n", "p.txt")->view()));  // INST without a MARK
  CHECK(try_read("", "empty.pt") == "empty.pt: file is empty");
}
