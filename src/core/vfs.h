// Where input paths lead: local files and directories, or remote ones (https://, hf://, s3://) served by
// the Remote installed at startup (src/remote, libcurl). Readers name paths and go through here; they
// never see the difference: a remote file is a MappedFile whose view fetches the byte ranges read
// (bytes.h's Fetcher), a remote folder is a listing.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"
#include "core/url.h"

namespace ckpt::vfs {

// File: a regular file. Dir: a directory (a listing can be had). Unknown: a URL that can be read but not
// listed (https://, an s3:// key): it is a file when read, and never a sibling found by looking.
enum class Kind { Missing, File, Dir, Unknown };

struct Entry {
  std::string name;  // the last component
  bool dir = false;
  uint64_t size = 0;  // files only
  bool other = false;  // local: neither a directory nor a regular file (a socket, a dangling link): nothing to read
};

// What a remote scheme provides. Every method may be called from several threads.
class Remote {
 public:
  virtual ~Remote() = default;
  virtual bool handles(std::string_view path) const = 0;
  virtual Kind kind(const std::string& path) = 0;
  // The directory's entries sorted by name; throws InputError (or EnvironmentError: the network,
  // credentials) when it cannot be listed.
  virtual std::vector<Entry> list(const std::string& dir) = 0;
  virtual std::shared_ptr<MappedFile> open(const std::string& path) = 0;
};

// Installed once at startup, before any thread reads (main). Without one, URLs are missing files.
void install(std::shared_ptr<Remote> remote);

// `-` names standard input: a file, opened by the source installed at startup (the CLI spools a pipe to a
// file that maps like any other, under its --limit stdin-bytes). Without one, `-` is a local path.
inline bool is_stdin(std::string_view path) { return path == "-"; }
void install_stdin(std::function<std::shared_ptr<MappedFile>()> open);

Kind kind(const std::string& path);
inline bool is_dir(const std::string& path) { return kind(path) == Kind::Dir; }
// A file known to exist (a local regular file, a listed remote one).
inline bool is_file(const std::string& path) { return kind(path) == Kind::File; }
std::vector<Entry> list(const std::string& dir);
// Throws InputError naming the path when it cannot be opened.
std::shared_ptr<MappedFile> open(const std::string& path);


// Path arithmetic with '/' for local paths and URLs alike.
std::string join(const std::string& dir, std::string_view name);
std::string parent(const std::string& path);  // "" for a bare name
std::string filename(const std::string& path);

// Bytes and requests a remote input cost, counted where they happen into the scope of the thread that
// opened the file (each input of a command runs in its own scope: cli/inputs.cc).
struct Transfer {
  std::atomic<uint64_t> requests{0};  // HTTP requests sent (a redirect followed is one more)
  std::atomic<uint64_t> bytes{0};  // response body bytes received
  std::atomic<uint64_t> files{0};  // remote files opened
  // Remote files read in more than one response from a server that gives neither a strong ETag nor a
  // Last-Modified: a change between two of their requests could not be detected.
  std::atomic<uint64_t> unverified{0};
};
// Such files of the whole process, by display name, each once (the CLI warns about them at exit).
void note_unverified(const std::string& display);
std::vector<std::string> unverified();
// The innermost scope of this thread (the process-wide one when none is open).
std::shared_ptr<Transfer> current_transfer();
// What was counted outside every scope (listings made while expanding the operands).
const Transfer& process_transfer();
class TransferScope {
 public:
  TransferScope();
  ~TransferScope();
  TransferScope(const TransferScope&) = delete;
  TransferScope& operator=(const TransferScope&) = delete;
  const Transfer& stats() const { return *mine_; }

 private:
  std::shared_ptr<Transfer> mine_, outer_;
};

}  // namespace ckpt::vfs
