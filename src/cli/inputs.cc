// Many inputs (see inputs.h): operands expanded, stdin spooled, and the runner that reads files on a few
// threads while printing results in input order.
#include "cli/inputs.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "core/reader.h"
#include "core/security.h"
#include "core/text.h"
#include "core/threads.h"
#include "core/vfs.h"

namespace ckpt::cli {

const char* const kCheckpointExtensions[] = {".pt",          ".pth", ".bin", ".ckpt", ".pt2", ".ptl",
                                             ".safetensors", ".pkl", ".tar", ".zip",  nullptr};

namespace {

bool glob_matches(const std::string& glob, const std::string& rel) {
  if (::fnmatch(glob.c_str(), rel.c_str(), 0) == 0) return true;
  if (glob.find('/') != std::string::npos) return false;
  const auto slash = rel.rfind('/');
  return slash != std::string::npos && ::fnmatch(glob.c_str(), rel.c_str() + slash + 1, 0) == 0;
}

bool any_matches(const std::vector<std::string>& globs, const std::string& rel) {
  return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return glob_matches(g, rel); });
}

bool has_checkpoint_extension(const std::string& rel) {
  std::string lower = rel;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* const* e = kCheckpointExtensions; *e; ++e) {
    const size_t n = std::strlen(*e);
    if (lower.size() > n && lower.compare(lower.size() - n, n, *e) == 0) return true;
  }
  return false;
}

// The walk of one directory operand: checkpoint files and checkpoint directories under it, sorted.
struct Walk {
  const InputOptions& o;
  const std::string& root;
  std::set<std::pair<dev_t, ino_t>> seen;  // each directory walked once: a symlink loop ends
  std::vector<InputItem>& out;
  std::string error;  // the first directory that could not be listed

  // One folder's listing (vfs::list: local, or a remote one's, a tree without links), files and checkpoint
  // folders taken, other folders walked. A local folder is walked once, so a symlink loop ends.
  void dir(const std::string& rel) {
    const std::string path = rel.empty() ? root : vfs::join(root, rel);
    if (!vfs::is_url(path)) {
      struct stat st {};
      if (::stat(path.c_str(), &st) != 0 || !seen.insert({st.st_dev, st.st_ino}).second) return;
    }
    std::vector<vfs::Entry> entries;
    try {
      entries = vfs::list(path);
    } catch (const InputError& e) {
      if (error.empty()) error = e.render();
      return;
    }
    for (const vfs::Entry& e : entries) {
      if (e.other) continue;  // a dangling symlink, a socket: nothing to read
      const std::string child_rel = rel.empty() ? e.name : rel + "/" + e.name;
      const std::string child = vfs::join(root, child_rel);
      if (e.dir) {
        if (any_matches(o.exclude, child_rel)) continue;  // an excluded directory is not walked
        if (is_model_folder(child)) {
          if (selected(child_rel, true, o.include, o.exclude)) out.push_back({child, ""});
        } else {
          dir(child_rel);
        }
      } else if (selected(child_rel, false, o.include, o.exclude)) {
        out.push_back({child, ""});
      }
    }
  }
};

}  // namespace

bool selected(const std::string& rel, bool is_dir, const std::vector<std::string>& include,
              const std::vector<std::string>& exclude) {
  if (any_matches(exclude, rel)) return false;
  if (!include.empty()) return any_matches(include, rel);
  return is_dir || has_checkpoint_extension(rel);
}

Expanded expand_inputs(const InputOptions& o) {
  if (o.files.empty()) throw UsageError("no FILE given");
  if (std::count_if(o.files.begin(), o.files.end(), [](const std::string& f) { return vfs::is_stdin(f); }) > 1)
    throw UsageError("'-' (stdin) given more than once: stdin is read once");
  Expanded e;
  e.several = o.files.size() > 1;
  // An operand that cannot even be classified (a remote listing refused: 401, 404) is one failed input;
  // the others still run.
  for (const std::string& f : o.files) {
    try {
      if (classify(f) != Operand::Folder) {  // a file, stdin, one checkpoint's folder, or missing (its read says so)
        e.items.push_back({f, ""});
        continue;
      }
    } catch (const InputError& x) {
      e.items.push_back({f, x.what()});
      continue;
    } catch (const EnvironmentError& x) {
      e.items.push_back({f, x.what(), true});
      continue;
    }
    e.several = true;
    const size_t before = e.items.size();
    Walk w{o, f, {}, e.items, ""};
    w.dir("");
    if (!w.error.empty()) {
      e.items.push_back({f, w.error});
    } else if (e.items.size() == before) {
      std::string what = o.include.empty() ? "no checkpoint file (extensions .pt .pth .bin .ckpt .pt2 .ptl .safetensors .pkl "
                                             ".tar .zip, or a DCP / sharded directory)"
                                           : "no file matching --include";
      e.items.push_back({f, fmt::format("is a directory with {} in it", what)});
    }
  }
  return e;
}

void InputItem::raise() const {
  if (error.empty()) return;
  if (environment) throw EnvironmentError(error);
  throw InputError(name, error);
}

namespace {
// All n bytes through `io` (::read or ::write), resumed after EINTR and short counts; false at an error or EOF.
template <class Byte, class Io>
bool all_of_fd(Io io, int fd, Byte* c, size_t n) {
  while (n) {
    const ssize_t k = io(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}
}  // namespace

bool write_all(int fd, const void* p, size_t n) { return all_of_fd(::write, fd, static_cast<const char*>(p), n); }
bool read_all(int fd, void* p, size_t n) { return all_of_fd(::read, fd, static_cast<char*>(p), n); }

namespace {

std::shared_ptr<MappedFile> spool_stdin(const Limits& limits) {
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) != 0) throw InputError("-", std::string("stdin: cannot stat: ") + std::strerror(errno));
  // `ckpt check - < model.pt`: the file itself, nothing to copy.
  if (S_ISREG(st.st_mode) && ::lseek(STDIN_FILENO, 0, SEEK_CUR) == 0) return MappedFile::open_fd(STDIN_FILENO, "-");
  if (::isatty(STDIN_FILENO)) throw InputError("-", "stdin is a terminal: pipe a checkpoint in (cat model.pt | ckpt check -)");
  const char* env = std::getenv("TMPDIR");
  const std::string dir = env && *env ? env : "/tmp";
  std::string name = vfs::join(dir, "ckpt-stdin-XXXXXX");
  const int fd = ::mkstemp(name.data());
  if (fd < 0) throw EnvironmentError(fmt::format("-: cannot spool stdin to {}: {}", dir, std::strerror(errno)));
  ::unlink(name.c_str());  // gone when the last descriptor and mapping are
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      throw InputError("-", fmt::format("stdin: read failed after {} bytes: {}", total, std::strerror(e)));
    }
    if (n == 0) break;
    total += static_cast<uint64_t>(n);
    if (total > limits.stdin_bytes) {
      ::close(fd);
      throw InputError("-", fmt::format("stdin holds more than {} bytes (the stdin-bytes limit; raise it with --limit "
                                        "stdin-bytes=N, or give the file's path)",
                                        limits.stdin_bytes));
    }
    if (!write_all(fd, buf.data(), static_cast<size_t>(n))) {
      const int e = errno;
      ::close(fd);
      throw EnvironmentError(
          fmt::format("-: cannot spool stdin to {} after {} bytes: {}", dir, total - static_cast<uint64_t>(n), std::strerror(e)));
    }
  }
  // The copy becomes stdin (a regular file at offset 0): ckpt-torch, started after this, maps it too.
  if (::dup2(fd, STDIN_FILENO) < 0 || ::lseek(STDIN_FILENO, 0, SEEK_SET) != 0) {
    const int e = errno;
    ::close(fd);
    throw EnvironmentError(fmt::format("-: cannot reopen the spooled stdin: {}", std::strerror(e)));
  }
  ::close(fd);
  return MappedFile::open_fd(STDIN_FILENO, "-");
}

}  // namespace

std::shared_ptr<MappedFile> stdin_file(const Limits& limits) {
  static std::mutex mu;
  static std::shared_ptr<MappedFile> file;
  static std::string error;  // a failed spool fails the same way again (the bytes are gone)
  std::lock_guard<std::mutex> lock(mu);
  if (const char* e = std::getenv("CKPT_STDIN_ERROR"); e && *e && error.empty()) {
    error = e;  // the ckpt that started this ckpt-torch could not spool stdin (load, precheck.h)
    ::unsetenv("CKPT_STDIN_ERROR");
  }
  if (!file) {
    if (!error.empty()) throw InputError("-", error);
    try {
      file = spool_stdin(limits);
    } catch (const InputError& e) {
      error = e.what();
      throw;
    }
  }
  return file;
}

void flush_output(std::FILE* f) {
  errno = 0;
  if (std::fflush(f) != 0 || std::ferror(f)) note_output_errno(errno);
}

std::string json_line(const std::string& doc) {
  std::string out;
  out.reserve(doc.size());
  for (size_t k = 0; k < doc.size(); ++k) {
    if (doc[k] != '\n') {
      out += doc[k];
      continue;
    }
    while (k + 1 < doc.size() && doc[k + 1] == ' ') ++k;
    if (!out.empty() && out.back() == ',') out += ' ';  // nlohmann's ", " between members, as on one line
  }
  return out + "\n";
}

std::string error_record(const std::string& command, const std::string& file, const std::string& error, int exit_code) {
  const nlohmann::ordered_json j{
      {"schema", "ckpt.error/1"}, {"file", vfs::display(file)}, {"command", command}, {"error", error}, {"exit", exit_code}};
  return json_line(j.dump(1));  // the spacing of ckpt's other lines
}

int worse_exit(int a, int b) {
  auto rank = [](int c) { return c == kExitOk ? 0 : c == kExitFindings ? 1 : c == kExitBadInput ? 2 : 3; };
  return rank(b) > rank(a) ? b : a;
}

unsigned resolve_jobs(unsigned jobs, size_t inputs) {
  unsigned j = jobs ? jobs : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<size_t>(1, std::min<size_t>(j, inputs)));
}

namespace {

// One input run to completion: the task, or the error that stopped it, written to out / err.
int run_one(const InputItem& item, const RunPlan& plan, const InputTask& task, size_t index, std::FILE* out, std::FILE* err) {
  if (plan.header) plan.header(index, item, out);
  std::string msg;
  int rc = kExitBadInput;
  try {
    if (!plan.task_sees_walk_errors) item.raise();
    return task(index, item, out, err);
  } catch (const UsageError&) { throw; } catch (const InputError& e) {
    msg = e.render();
  } catch (const EnvironmentError& e) {
    msg = visible(e.what());  // a server's text may be in it
    rc = kExitEnvironment;
  } catch (const std::bad_alloc&) {
    msg = visible(item.name) + ": out of memory";
  } catch (const std::exception& e) {  // LibTorch refused something (c10::Error), or a defect: its first line
    const std::string what = e.what();
    msg = fmt::format("{}: {}{}", visible(item.name), kLinksLibTorch ? "LibTorch: " : "", visible(what.substr(0, what.find('\n'))));
  }
  if (plan.header) fmt::print(out, "(not read: {})\n", visible(msg));
  if (!plan.error_records_for.empty()) {
    const std::string rec = error_record(plan.error_records_for, item.name, msg, rc);
    write_output(out, rec);
  }
  flush_output(out);
  fmt::print(err, "ckpt: error: {}\n", msg);
  return rc;
}

struct Slot {
  bool done = false;
  std::string out, err;
  int rc = 0;
  std::exception_ptr fatal;
};

std::string close_stream(std::FILE* f, char*& buf, size_t& len) {
  std::fclose(f);
  std::string s(buf ? buf : "", len);
  std::free(buf);
  return s;
}

// One input run with its output and errors kept in memory, to be printed in input order.
Slot run_buffered(const InputItem& item, const RunPlan& plan, const InputTask& task, size_t i) {
  Slot s;
  char *obuf = nullptr, *ebuf = nullptr;
  size_t olen = 0, elen = 0;
  std::FILE* out = ::open_memstream(&obuf, &olen);
  std::FILE* err = ::open_memstream(&ebuf, &elen);
  if (!out || !err) {
    s.fatal = std::make_exception_ptr(EnvironmentError("cannot allocate an output buffer"));
  } else {
    try {
      s.rc = run_one(item, plan, task, i, out, err);
    } catch (...) { s.fatal = std::current_exception(); }
  }
  if (out) s.out = close_stream(out, obuf, olen);
  if (err) s.err = close_stream(err, ebuf, elen);
  s.done = true;
  return s;
}

}  // namespace

int run_inputs(const std::vector<InputItem>& items, const RunPlan& plan, const InputTask& task) {
  int worst = kExitOk;
  if (plan.jobs <= 1 || items.size() <= 1) {
    for (size_t i = 0; i < items.size(); ++i) {
      worst = worse_exit(worst, run_one(items[i], plan, task, i, plan.out, plan.err));
      flush_output(plan.out);
    }
    return worst;
  }
  // Workers take inputs in order and keep at most `window` finished results waiting for an earlier one;
  // the calling thread prints them in order. One pool (run_threads): a worker that cannot start, or a
  // printer that fails, stops the others, whose waits poll `stop`.
  const size_t window = 4 * static_cast<size_t>(plan.jobs);
  std::vector<Slot> slots(items.size());
  std::mutex mu;
  std::condition_variable cv;
  size_t next = 0, printed = 0;
  std::atomic<bool> stop{false};
  const auto wait = [&](std::unique_lock<std::mutex>& lock, const auto& ready) {
    while (!stop && !ready()) cv.wait_for(lock, std::chrono::milliseconds(50));
    return !stop;
  };
  auto worker = [&] {
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mu);
        if (!wait(lock, [&] { return next >= items.size() || next < printed + window; }) || next >= items.size()) return;
        i = next++;
      }
      Slot s = run_buffered(items[i], plan, task, i);
      {
        std::lock_guard<std::mutex> lock(mu);
        slots[i] = std::move(s);
      }
      cv.notify_all();
    }
  };
  std::exception_ptr fatal;
  auto printer = [&] {
    for (size_t i = 0; i < items.size() && !fatal; ++i) {
      Slot s;
      {
        std::unique_lock<std::mutex> lock(mu);
        if (!wait(lock, [&] { return slots[i].done; })) return;
        s = std::move(slots[i]);
        slots[i] = Slot{};
      }
      write_output(plan.out, s.out);
      flush_output(plan.out);
      std::fwrite(s.err.data(), 1, s.err.size(), plan.err);
      worst = worse_exit(worst, s.rc);
      fatal = s.fatal;
      {
        std::lock_guard<std::mutex> lock(mu);
        printed = i + 1;
      }
      cv.notify_all();
    }
    stop = true;  // all printed (or a fatal error): the workers still waiting go
    cv.notify_all();
  };
  run_threads(plan.jobs + 1, stop, [&](unsigned j) { j == 0 ? printer() : worker(); });
  if (fatal) std::rethrow_exception(fatal);
  return worst;
}

}  // namespace ckpt::cli
