// `ckpt load` in ckpt-torch (several files one after another): read each file's structure with ckpt's own readers (never
// LibTorch's unpickler), materialize every model tensor on the device, optionally into a TorchScript architecture, and report
// time, bandwidth, memory, NaN/Inf and key matching.
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <stdexcept>

#include "cli/commands.h"
#include "cli/inputs.h"
#include "cli/precheck.h"
#include "core/device.h"
#include "core/keys.h"
#include "core/load_report.h"
#include "core/reader.h"
#include "core/render_report.h"
#include "core/summary.h"
#include "core/text.h"
#include "core/values.h"
#include "core/vfs.h"
#include "torch/materialize.h"
#include "torch/script.h"

namespace ckpt::cli {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Seconds since this process started (exec of ckpt, which execs ckpt-torch in place, and LibTorch's
// static initialization all come before main).
double process_age() {
  std::FILE* f = std::fopen("/proc/self/stat", "r");
  if (!f) return 0.0;
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  const char* p = std::strrchr(buf, ')');  // the command name may hold spaces
  if (!p) return 0.0;
  unsigned long long start = 0;
  // fields after the name: state(3) ... starttime(22)
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) != 1)
    return 0.0;
  timespec now{};
  clock_gettime(CLOCK_BOOTTIME, &now);
  const double age = static_cast<double>(now.tv_sec) + now.tv_nsec * 1e-9 - static_cast<double>(start) / sysconf(_SC_CLK_TCK);
  return age > 0 ? age : 0.0;
}

// This process's own high-water mark (VmHWM). Not getrusage's ru_maxrss: that is kept across fork and
// exec, so a load started from a large process would report the parent's peak.
uint64_t peak_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof(line), f))
    if (std::sscanf(line, "VmHWM: %llu kB", &kb) == 1) break;
  std::fclose(f);
  return static_cast<uint64_t>(kb) * 1024;
}

// What materialize() is asked for: the device, --checksum, --stream, the run's ring and --dtype (a
// floating dtype LibTorch has).
torchb::MaterializeOptions materialize_options(const LoadOptions& o, const c10::Device& device, StagingRing* ring) {
  torchb::MaterializeOptions mo;
  mo.device = device;
  mo.checksum = o.checksum;
  mo.stream = o.stream;
  mo.ring = ring;
  if (!o.dtype.empty()) {
    const DType* d = dtype_by_name(o.dtype);
    const auto st = d ? torchb::scalar_type(*d) : std::nullopt;
    if (!st || d->cls != DTypeClass::Float)
      throw UsageError(fmt::format("--dtype {}: expected a floating dtype such as float16", o.dtype));
    mo.dtype = st;
  }
  return mo;
}

// The report's fields that the options and the device fix before anything is read.
LoadReport report_of(const LoadOptions& o, const std::string& file, const c10::Device& device) {
  LoadReport rep;
  rep.file = vfs::display(file);  // a URL without its userinfo and its query's secrets
  rep.device = device.str();
  rep.libtorch = torchb::libtorch_version();
  rep.empty_init = o.empty_init;
  rep.dtype = o.dtype.empty() ? "" : std::string(dtype_by_name(o.dtype)->name);
  rep.strip_prefix = o.strip_prefix;
  rep.add_prefix = o.add_prefix;
  return rep;
}

// The module FILE's tensors go into: --model's architecture, matched key by key before anything is
// allocated (its own weights read, or left on meta with --empty-init), or FILE's own TorchScript code.
struct Into {
  std::unique_ptr<Checkpoint> arch;  // --model
  std::optional<torch::jit::Module> module;
};
Into load_into(const LoadOptions& o, const Checkpoint& ck, const c10::Device& device, const Limits& lim,
                   LoadReport& rep) {
  Into tg;
  if (o.model.empty()) {
    if (ck.format == Format::TorchScript)
      tg.module = torchb::load_structure(ck);  // LibTorch must be able to compile it (exit 3 naming missing ops)
    return tg;
  }
  tg.arch = std::make_unique<Checkpoint>(read_checkpoint(o.model, lim));
  const Checkpoint& arch = *tg.arch;
  if (arch.format != Format::TorchScript)
    throw UsageError(
        fmt::format("--model {}: expected a TorchScript archive (torch.jit.save), got {}", o.model, to_string(arch.format)));
  rep.model = o.model;
  std::vector<const Tensor*> file_keys, model_keys;
  for (const Tensor& t : ck.tensors) file_keys.push_back(&t);
  for (const Tensor& t : arch.tensors) model_keys.push_back(&t);
  rep.match = match_keys(file_keys, model_keys, o.strip_prefix, o.add_prefix);
  const auto ta = Clock::now();
  if (o.empty_init) {
    tg.module = torchb::load_structure(arch);  // meta: ARCH's weights are not read
    rep.arch_bytes_skipped = summarize(arch).totals.storage_bytes;
  } else {
    tg.module = torchb::load_plain(arch, device);  // what a plain load does: ARCH's weights read and copied
    rep.arch_bytes_read = summarize(arch).totals.storage_bytes;  // read even for meta, then moved there
  }
  rep.arch_seconds = since(ta);
  return tg;
}

// Into the module: empty init assigns FILE's tensors (each byte written once); a plain load copies
// them over the weights the architecture brought along.
void fill_module(const LoadOptions& o, Into& tg, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                 const c10::Device& device, LoadReport& rep) {
  std::map<std::string, at::Tensor> have;
  for (auto& [name, t] : torchb::module_state(*tg.module)) have.emplace(name, t);
  std::set<std::string> mismatched;
  if (rep.match)
    for (const KeyMismatch& m : rep.match->mismatched) mismatched.insert(m.key);
  for (auto& [name, t] : tensors) {
    auto it = have.find(name);
    if (it == have.end() || mismatched.count(name)) continue;
    if (o.empty_init || !tg.arch || device.is_meta()) {
      torchb::assign(*tg.module, name, t);
    } else {
      at::NoGradGuard no_grad;
      it->second.copy_(t);
      rep.bytes_written_twice += static_cast<uint64_t>(t.numel()) * t.element_size();
    }
  }
  if (tg.arch && o.empty_init) {
    size_t left = 0;
    for (auto& [name, t] : torchb::module_state(*tg.module)) left += t.is_meta() && !device.is_meta();
    if (left) rep.notes.push_back(fmt::format("{} tensors of the model were not in FILE and stay on meta", left));
  }
}

// The notes that end a report; true when the load fails (exit 1) for what they say: nothing loaded, or
// --fail-on nonfinite and a NaN / Inf.
bool closing_notes(const LoadOptions& o, const Checkpoint& ck, LoadReport& rep) {
  const auto& cs = ck.torchscript.constants;
  const bool constants = ck.format == Format::TorchScript && cs && cs->tensors > 0;
  if (constants)
    rep.notes.push_back(
        fmt::format("{} tensor(s) are TorchScript constants (constants.pkl, e.g. frozen weights): LibTorch "
                    "loads them with the code; they are not listed here",
                    cs->tensors));
  // A load that loaded nothing is no success: say why, exit 1 (as an incomplete load).
  const bool nothing = rep.tensors == 0;
  if (nothing)
    rep.notes.push_back(constants ? "nothing loaded: the archive has no parameters or buffers (its constants load with the code)"
                                  : "nothing loaded: the file holds no tensors");
  const bool nonfinite = o.fail_on_nonfinite && (rep.nan > 0 || rep.inf > 0);
  if (nonfinite) {
    size_t n = 0;
    for (const LoadedTensor& t : rep.rows) n += t.stats.nan || t.stats.inf;
    rep.notes.push_back(fmt::format("--fail-on nonfinite: {} tensor(s) hold NaN or Inf ({} NaN, {} Inf)", n, rep.nan, rep.inf));
  }
  return nothing || nonfinite;
}

// One input (`file`, as named in the results); `several`: free its tensors and mapping when done.
int load_one(const LoadOptions& o, const std::string& file, size_t index, bool several, std::FILE* out, double startup,
             StagingRing* ring) {
  const auto t0 = Clock::now();
  const c10::Device device = torchb::parse_device(o.device_spec, o.device);
  torchb::MaterializeOptions mo = materialize_options(o, device, ring);
  const Limits lim = o.resolve();
  mo.stall_seconds = static_cast<double>(lim.stall_seconds);
  LoadReport rep = report_of(o, file, device);

  // Freed with the load when it fails or when other inputs follow; with one input kept until exit (CPU
  // tensors are views of its mapping; see summary.cc on not freeing at exit).
  auto ck = std::make_unique<Checkpoint>(read_checkpoint(file, lim));
  rep.format = to_string(ck->format);
  rep.read_seconds = since(t0);
  // Checked by the parent ckpt process while LibTorch started here (see precheck.h)?
  double pre_seconds = 0.0;
  std::optional<std::vector<TensorCheck>> prechecked;
  if (device.is_cpu()) prechecked = read_prechecked(index, *ck, o.checksum, &pre_seconds);
  Into tg = load_into(o, *ck, device, lim, rep);

  std::vector<torchb::Target> targets;
  for (const Tensor& t : ck->tensors) targets.push_back({renamed_key(t.name, o.strip_prefix, o.add_prefix), &t});
  Progress progress;
  progress.enabled = !o.wants_json() && isatty(STDERR_FILENO);
  mo.progress = [&](uint64_t done, uint64_t total) { progress(done, total); };
  if (prechecked) {
    mo.prechecked = &*prechecked;
    rep.check_seconds = pre_seconds;
  }
  const auto tl = Clock::now();
  auto tensors = torchb::materialize(*ck, targets, mo, rep);
  rep.load_seconds = since(tl);
  progress.clear();
  if (tg.module) fill_module(o, tg, tensors, device, rep);
  const bool failed = closing_notes(o, *ck, rep);

  rep.startup_seconds = startup;
  rep.seconds = startup + since(t0);
  rep.peak_rss = peak_rss_bytes();
  std::string text = o.wants_json() ? load_json_text(rep) : render_load_text(rep, use_color(STDOUT_FILENO), o.tensors);
  if (output_format(o.format, o.json, o.jsonl) == OutputFormat::JsonLines) text = json_line(text);
  write_output(out, text);
  flush_output(out);
  // With several inputs each file's tensors and mapping go before the next is loaded (device memory), as
  // they do on every error; one input's stay until exit.
  if (!several) {
    keep_until_exit(ck);
    keep_until_exit(tg.arch);
  }
  return rep.incomplete() || failed ? kExitFindings : kExitOk;
}

}  // namespace

int run_load(const LoadOptions& o) {
  const double startup = process_age();
  // The streaming load's ring, allocated once for every input, on a thread of its own from here on: its
  // first CUDA call makes the context while LibTorch starts CUDA here and the checkpoint is read.
  std::unique_ptr<StagingRing> ring;
  const DeviceSpec& spec = o.device_spec;
  if (spec.kind == DeviceSpec::Kind::Cuda || o.stream)
    ring = std::make_unique<StagingRing>(ring_shape(RingOptions{o.chunk_bytes, o.ring_bytes, 0}),
                                         torchb::make_ring_memory(spec.kind == DeviceSpec::Kind::Cuda, std::max(0, spec.index)));
  const Expanded in = expand_inputs(o.inputs);
  const JsonShape shape = json_shape(output_format(o.format, o.json, o.jsonl), in.several);
  RunPlan plan;
  plan.jobs = 1;  // one after another: each file is materialized on the device
  if (shape == JsonShape::Lines) plan.error_records_for = "load";
  if (in.several && shape == JsonShape::None)
    plan.header = [](size_t index, const InputItem& item, std::FILE* out) {
      fmt::print(out, "{}==> {} <==\n", index ? "\n" : "", visible(vfs::display(item.name)));
    };
  return run_inputs(in.items, plan, [&](size_t index, const InputItem& item, std::FILE* out, std::FILE*) {
    // ckpt-torch's start-up counts once, in the first file's time.
    return load_one(o, item.name, index, in.several, out, index == 0 ? startup : 0.0, ring.get());
  });
}

}  // namespace ckpt::cli
