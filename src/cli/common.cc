#include "cli/common.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace ckpt::cli {

Limits LimitOptions::resolve() const {
  Limits lim;
  for (const std::string& kv : limits) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos) throw UsageError(fmt::format("--limit {}: expected NAME=VALUE", kv));
    const std::string err = set_limit(lim, kv.substr(0, eq), kv.substr(eq + 1));
    if (!err.empty()) throw UsageError("--limit: " + err);
  }
  return lim;
}

void add_limit_option(CLI::App* sub, LimitOptions& o) {
  sub->add_option("--limit", o.limits,
                  "Raise or lower a resource limit, NAME=VALUE (k/M/G suffixes); defaults: " + describe_limits())
      ->type_name("NAME=VALUE")
      ->type_size(1)
      ->expected(1, 1 << 20)  // repeatable, one value each, so a following FILE is not swallowed
      ->allow_extra_args(false);
}

bool use_color(int fd) {
  const char* nc = std::getenv("NO_COLOR");
  return isatty(fd) && (nc == nullptr || nc[0] == '\0');
}

void exec_torch_backend(int argc, char** argv, const char* what) {
  std::string path;
  if (const char* env = std::getenv("CKPT_TORCH"); env && *env) {
    path = env;
  } else {
    char self[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
      self[n] = '\0';
      path = self;
      path = path.substr(0, path.rfind('/') + 1) + "ckpt-torch";
    } else {
      path = "ckpt-torch";
    }
  }
  std::string arg0 = path;
  argv[0] = arg0.data();
  (void)argc;
  ::execv(path.c_str(), argv);
  throw EnvironmentError(
      fmt::format("{} needs ckpt-torch, the sibling binary built with LibTorch: cannot run {}: {} "
                  "(build it with LibTorch installed, or set CKPT_TORCH)",
                  what, path, std::strerror(errno)));
}

}  // namespace ckpt::cli
