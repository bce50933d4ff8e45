// The one error type for bad input. It names the file, the member inside it (a zip entry, or "" for the
// file itself), the byte offset within that member, and what was being read, and renders as
//   model.pt: archive/data.pkl+0x1a3: BINUNICODE length 4096 exceeds 40 remaining bytes
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ckpt {

// Exit codes, shared by every command (documented in README and man/ckpt.1).
enum ExitCode : int {
  kExitOk = 0,
  kExitFindings = 1,  // findings at or above --fail-on
  kExitUsage = 2,  // bad command line
  kExitBadInput = 3,  // unreadable, malformed or unsupported input
  kExitEnvironment = 4  // the environment cannot do it (no LibTorch backend, no CUDA)
};

class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string member, uint64_t offset, const std::string& what)
      : std::runtime_error(what), file_(std::move(file)), member_(std::move(member)), offset_(offset), has_offset_(true) {}
  // An error about a member whose place is no byte offset (a JSON pointer said in `what`).
  InputError(std::string file, std::string member, const std::string& what)
      : std::runtime_error(what), file_(std::move(file)), member_(std::move(member)) {}
  // An error about the file as a whole (cannot open, unknown format).
  InputError(std::string file, const std::string& what) : std::runtime_error(what), file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  const std::string& member() const { return member_; }
  uint64_t offset() const { return offset_; }
  bool has_offset() const { return has_offset_; }
  // "file: member+0x1a3: message" (member and offset left out when unknown), through visible()
  // (text.h): one line, whatever controls the file put into the member name or the names quoted.
  std::string render() const;

 private:
  std::string file_;
  std::string member_;
  uint64_t offset_ = 0;
  bool has_offset_ = false;
};

// The input is readable but uses something ckpt does not support (old TorchScript, tar format).
class UnsupportedError : public InputError {
 public:
  using InputError::InputError;
};

// A command line that parses but makes no sense (unknown rule id, bad --device): exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The environment cannot do what was asked (no CUDA, no LibTorch backend): exit 4.
class EnvironmentError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Remote inputs (https://, hf://, s3://), the part of Limits the HTTP client takes (remote/http.h): seconds to
// connect; a transfer slower than low-speed bytes per second over stall-seconds is abandoned; seconds one
// request may take in all (its redirects and retries included); retries of a request after a 429 / 5xx /
// connection reset; the largest whole download taken from a server that ignores Range (0: none larger than
// the first range of 256 KiB).
struct NetworkLimits {
  uint64_t connect_seconds = 10;
  uint64_t stall_seconds = 30;
  uint64_t low_speed = 1024;
  uint64_t request_seconds = 300;
  uint64_t retries = 4;
  uint64_t download_bytes = 0;
};

// Resource limits applied while reading untrusted input. Every limit has a clear error when exceeded.
struct Limits : NetworkLimits {
  uint64_t pickle_depth = 1000;  // nesting of MARK / containers on the pickle stack
  uint64_t memo_entries = 50'000'000;  // distinct memo keys (a 1M-tensor state dict stores ~11M)
  uint64_t string_bytes = 256ull << 20;  // one STRING / BYTES / UNICODE payload
  uint64_t pickle_ops = 200'000'000;  // opcodes executed in one pickle
  uint64_t pickle_bytes = 1ull << 30;  // size of one pickle stream
  uint64_t zip_entries = 10'000'000;  // central directory records
  uint64_t tensors = 10'000'000;  // tensor entries in one checkpoint
  uint64_t walk_nodes = 100'000'000;  // objects visited while interpreting the unpickled graph
  uint64_t inflate_bytes = 64ull << 20;  // one deflated member (TorchScript code/), after inflating
  // A checkpoint read from stdin (`-`) is spooled to an unlinked file in $TMPDIR before it is mapped: a
  // pipe that never ends must not fill the disk. 64 GiB holds any single-file checkpoint published today
  // (a 30B-parameter model in fp16); larger ones come sharded, as directories, which stdin cannot carry.
  uint64_t stdin_bytes = 64ull << 30;
};

// Sets one limit by its command-line name (pickle-depth, memo-entries, string-bytes, pickle-ops,
// pickle-bytes, zip-entries, tensors, walk-nodes, inflate-bytes, stdin-bytes, connect-seconds, stall-seconds,
// low-speed, request-seconds, retries, download-bytes); `value` may end in k, M or G (x1024).
// Returns "" or what was wrong.
std::string set_limit(Limits& limits, const std::string& name, const std::string& value);
// "name=default, ..." for help texts.
std::string describe_limits();

// Output that cannot be written (a full disk, a closed pipe) is exit 4 (main). By the time main looks,
// errno says something else, so the first failure's errno is kept here: write_output is fwrite that
// notes it, output_errno() gives it (0: none failed).
void write_output(std::FILE* f, std::string_view bytes);
void note_output_errno(int err);
int output_errno();

}  // namespace ckpt
