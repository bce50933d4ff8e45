#include "cli/precheck.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "cli/inputs.h"
#include "core/device.h"
#include "core/reader.h"
#include "core/storage.h"
#include "core/text.h"
#include "core/values.h"
#include "core/vfs.h"

namespace ckpt::cli {
namespace {

constexpr char kMagic[8] = {'C', 'K', 'P', 'T', 'C', 'H', 'K', '1'};

#pragma pack(push, 1)
struct Header {
  char magic[8];
  uint8_t ok;  // 0: the parent could not read or check the file (the child then finds out itself)
  uint8_t crc;  // CRC-32s included
  uint64_t tensors;  // ck.tensors.size()
  uint64_t file_size;  // ck.file_size
  double seconds;  // the parent's read + check time
};
struct Record {
  uint64_t nan, inf;
  uint8_t has_crc;
  uint32_t crc;
};
#pragma pack(pop)

}  // namespace

void Progress::operator()(uint64_t done, uint64_t total) {
  if (!enabled || total == 0) return;
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s < 1.0) return;
  shown = true;
  const int width = 30;
  const int fill = static_cast<int>(width * static_cast<double>(done) / static_cast<double>(total));
  fmt::print(stderr, "\r[{:<{}}] {:3.0f}%  {} / {}  {:.2f} GB/s", std::string(static_cast<size_t>(fill), '#'), width,
             100.0 * static_cast<double>(done) / static_cast<double>(total), human_bytes(done), human_bytes(total),
             static_cast<double>(done) / s / 1e9);
}

void Progress::clear() {
  if (shown) fmt::print(stderr, "\r{:<80}\r", "");
  shown = false;
}

int run_load_overlapped(int argc, char** argv, const LoadOptions& o) {
  const Limits lim = o.resolve();
  const Expanded in = expand_inputs(o.inputs);
  (void)json_shape(output_format(o.format, o.json, o.jsonl), in.several);  // refused here, before any fork
  if (std::any_of(in.items.begin(), in.items.end(), [](const InputItem& i) { return vfs::is_stdin(i.name); })) {
    try {
      (void)stdin_file(lim);  // now fd 0 is a regular file the child maps too
    } catch (const std::exception& e) {
      ::setenv("CKPT_STDIN_ERROR", e.what(), 1);  // the child reports it as the error of -
    }
  }
  int fds[2];
  // meta reads no byte; cuda (and cpu --stream) count NaN / Inf where the tensors land: nothing to
  // overlap. A remote input is fetched once, by ckpt-torch, not once here and again there.
  const bool remote = std::any_of(in.items.begin(), in.items.end(), [](const InputItem& i) { return vfs::is_url(i.name); });
  if (o.device_spec.kind != DeviceSpec::Kind::Cpu || o.stream || remote || ::pipe2(fds, O_CLOEXEC) != 0)
    exec_torch_backend(argc, argv, "ckpt load");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) exec_torch_backend(argc, argv, "ckpt load");
  if (pid == 0) {
    ::close(fds[1]);
    ::fcntl(fds[0], F_SETFD, 0);
    ::setenv("CKPT_PRECHECK_FD", std::to_string(fds[0]).c_str(), 1);
    try {
      exec_torch_backend(argc, argv, "ckpt load");
    } catch (const EnvironmentError& e) {
      fmt::print(stderr, "ckpt: error: {}\n", e.what());
      std::_Exit(kExitEnvironment);
    }
  }
  ::close(fds[0]);
  std::signal(SIGPIPE, SIG_IGN);  // the child may stop early (usage error, no CUDA): then stop writing
  bool pipe_ok = true;
  for (size_t index = 0; index < in.items.size() && pipe_ok; ++index) {
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof(kMagic));
    std::vector<Record> records;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      in.items[index].raise();
      // With one input freed by exit, as in summary.cc (sanitizer builds free it, so LeakSanitizer stays
      // meaningful); with several, freed before the next.
      std::unique_ptr<Checkpoint> owned = std::make_unique<Checkpoint>(read_checkpoint(in.items[index].name, lim));
      const Checkpoint* ck = owned.get();
      if (!in.several) keep_until_exit(owned);
      std::vector<const Tensor*> list;
      for (const Tensor& t : ck->tensors) list.push_back(&t);
      Progress progress;
      progress.enabled = !o.wants_json() && isatty(STDERR_FILENO);
      const StorageIndex index_of(*ck);
      // One core is LibTorch's (starting in the child); the others check.
      const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
      auto checks = check_values(*ck, index_of, list, o.checksum, cores > 1 ? cores - 1 : 1,
                                 [&](uint64_t done, uint64_t total) { progress(done, total); });
      progress.clear();
      for (const TensorCheck& c : checks)
        records.push_back({c.stats.nan, c.stats.inf, static_cast<uint8_t>(c.crc32.has_value()), c.crc32.value_or(0)});
      h.ok = 1;
      h.crc = o.checksum;
      h.tensors = ck->tensors.size();
      h.file_size = ck->file_size;
    } catch (const std::exception&) {
      h.ok = 0;  // the child reads the file itself and reports the error
    }
    h.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    pipe_ok = write_all(fds[1], &h, sizeof(h));
    if (pipe_ok && h.ok) pipe_ok = write_all(fds[1], records.data(), records.size() * sizeof(Record));
  }
  ::close(fds[1]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kExitEnvironment;
}

std::optional<std::vector<TensorCheck>> read_prechecked(size_t index, const Checkpoint& ck, bool need_crc, double* seconds) {
  // The pipe stays open across inputs; blocks arrive in input order.
  static int fd = -2;  // -2: not looked up yet, -1: none (or broken)
  static size_t next = 0;
  if (fd == -2) {
    const char* env = std::getenv("CKPT_PRECHECK_FD");
    fd = env && *env ? std::atoi(env) : -1;
    ::unsetenv("CKPT_PRECHECK_FD");
  }
  auto broken = [] {
    ::close(fd);
    fd = -1;
    return std::nullopt;
  };
  while (fd >= 0 && next <= index) {
    Header h{};
    if (!read_all(fd, &h, sizeof(h)) || std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0) return broken();
    std::vector<Record> records(h.ok ? h.tensors : 0);
    if (h.ok && !read_all(fd, records.data(), records.size() * sizeof(Record))) return broken();
    if (next++ < index) continue;  // an input this process did not get to (it failed before asking)
    if (!h.ok || h.tensors != ck.tensors.size() || h.file_size != ck.file_size || (!h.crc && need_crc)) return std::nullopt;
    std::vector<TensorCheck> out;
    for (const Record& r : records) {
      TensorCheck c;
      c.stats = {r.nan, r.inf};
      if (r.has_crc) c.crc32 = r.crc;
      out.push_back(c);
    }
    if (seconds) *seconds = h.seconds;
    return out;
  }
  return std::nullopt;
}

}  // namespace ckpt::cli
