#include "remote/remote_file.h"

#include <fmt/format.h>
#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <exception>
#include <thread>

#include "core/error.h"
#include "core/threads.h"
#include "core/zip.h"

namespace ckpt::remote {

Layout layout_of(const std::string& url) {
  std::string name = url.substr(0, url.find_first_of("?#"));
  name = name.substr(name.rfind('/') + 1);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto ends = [&](std::string_view x) { return name.size() > x.size() && name.compare(name.size() - x.size(), x.size(), x) == 0; };
  if (ends(".safetensors")) return Layout::kSafetensors;
  for (const char* x : {".pt", ".pth", ".bin", ".ckpt", ".pt2", ".ptl", ".zip"})
    if (ends(x)) return Layout::kZip;
  return Layout::kOther;
}

std::shared_ptr<RemoteFile> RemoteFile::open(FileSpec spec) {
  std::shared_ptr<RemoteFile> f(new RemoteFile());
  f->stats_ = vfs::current_transfer();
  f->stats_->files += 1;
  f->url_ = spec.url;
  f->auth_ = spec.auth;
  f->layout_ = layout_of(spec.url);
  f->spec_ = std::move(spec);
  if (f->spec_.size != UINT64_MAX) {
    f->allocate(f->spec_.size);
    return f;
  }
  // The first range: its response says the size (Content-Range) and the ETag. A zip's is its end.
  const uint64_t want = f->layout_ == Layout::kSafetensors ? kSafetensorsFirst : kFirstRange;
  std::string first(want, '\0');
  std::shared_ptr<const Auth> keep;
  Request r = f->request(0, want - 1, reinterpret_cast<uint8_t*>(first.data()), &keep);
  if (f->layout_ == Layout::kZip) r.suffix = want;
  r.if_range.clear();
  r.accept_416 = true;  // an empty file has no byte 0
  // A server that ignores Range sends the whole file: taken when it is no larger than the first range
  // would have been, or than --limit download-bytes allows, straight into the cache (held once).
  r.max_body = std::max(want, settings().download_bytes);
  RemoteFile* self = f.get();
  r.whole = [self](uint64_t capacity) {
    self->allocate(capacity);
    return self->buf_;
  };
  Response resp = get(r);
  if (resp.total == UINT64_MAX)
    throw InputError(f->spec_.display, "the server does not say the file's size (Content-Range without it)");
  f->validate(resp);
  f->note_redirect(resp.effective_url);
  if (resp.status == 200) {  // the whole file, already in buf_ (a capacity of Content-Length, or max_body)
    if (!f->buf_) f->allocate(resp.total);  // an empty body
    f->size_ = resp.total;
    f->blocks_ = (resp.total + kBlock - 1) / kBlock;
    f->head_ = f->size_;
    f->tail_ = 0;
    return f;
  }
  f->allocate(resp.total);
  if (resp.status == 206) f->take_first(reinterpret_cast<const uint8_t*>(first.data()), resp.first, std::min(want, f->size_ - resp.first));
  return f;
}

void RemoteFile::take_first(const uint8_t* bytes, uint64_t at, uint64_t len) {
  std::memcpy(buf_ + at, bytes, len);
  if (at == 0) head_.store(len, std::memory_order_release);
  if (at + len == size_) tail_.store(at, std::memory_order_release);
}

RemoteFile::~RemoteFile() {
  if (buf_) ::munmap(buf_, map_bytes_);
  if (bits_) ::munmap(bits_, bits_bytes_);
}

void RemoteFile::allocate(uint64_t size) {
  if (buf_) ::munmap(buf_, map_bytes_);  // a whole download tried again
  if (bits_) ::munmap(bits_, bits_bytes_);
  buf_ = nullptr;
  bits_ = nullptr;
  // A size no file has (a hostile Content-Range or listing) must not overflow the block arithmetic below,
  // nor ask for a bitmap of gigabytes: 64 TiB is past any checkpoint and any address space's half.
  constexpr uint64_t kMaxSize = 1ull << 46;
  if (size > kMaxSize)
    throw InputError(spec_.display, fmt::format("the server gives a size of {} bytes, more than the {} bytes ckpt reads", size, kMaxSize));
  size_ = size;
  blocks_ = (size + kBlock - 1) / kBlock;
  map_bytes_ = std::max<uint64_t>(blocks_ * kBlock, kBlock);
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw EnvironmentError(fmt::format("{}: cannot reserve {} bytes of address space: {}", spec_.display, size, std::strerror(errno)));
  buf_ = static_cast<uint8_t*>(p);
  // The bitmap too: anonymous zero pages, touched only where blocks are (2 MiB for a claimed 64 TiB
  // that is never read, not 128 MiB).
  bits_bytes_ = ((blocks_ + 63) / 64 + 1) * sizeof(uint64_t);
  void* b = ::mmap(nullptr, bits_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (b == MAP_FAILED)
    throw EnvironmentError(fmt::format("{}: cannot reserve {} bytes of address space: {}", spec_.display, bits_bytes_, std::strerror(errno)));
  bits_ = static_cast<std::atomic<uint64_t>*>(b);  // zero-filled: every block absent
  head_ = 0;
  tail_ = size;
}

void RemoteFile::note_redirect(const std::string& effective) const {
  std::lock_guard<std::mutex> lock(url_mu_);
  if (effective.empty() || effective == url_) return;
  // Later ranges go straight to where the redirect led (the Hub's CDN: its URL is signed), without the
  // credentials when that is another host.
  if (origin_of(effective) != origin_of(url_)) auth_.reset();
  url_ = effective;
}

Request RemoteFile::request(uint64_t first, uint64_t last, uint8_t* dst, std::shared_ptr<const Auth>* keep) const {
  Request r;
  {
    std::lock_guard<std::mutex> lock(url_mu_);
    r.url = url_;
    *keep = auth_;  // alive while the request uses it, whatever a redirect does to auth_ meanwhile
    r.auth = keep->get();
    // If-Range needs a strong validator: a weak one never matches, and every range would come back whole.
    if (!etag_.empty() && etag_.rfind("W/", 0) != 0) r.if_range = etag_;
  }
  r.display = spec_.display;
  r.ranged = true;
  r.first = first;
  r.last = last;
  r.dst = dst;
  r.stats = stats_.get();
  return r;
}

void RemoteFile::fetch(uint64_t first, uint64_t last, uint8_t* dst) const {
  std::shared_ptr<const Auth> keep;
  const Response resp = get(request(first, last, dst, &keep));
  if (resp.total != UINT64_MAX && resp.total != size_)
    throw InputError(spec_.display, fmt::format("changed on the server while being read (it had {} bytes, now {}): read it again",
                                                size_, resp.total));
  validate(resp);
  note_redirect(resp.effective_url);
}

void RemoteFile::validate(const Response& resp) const {
  const auto changed = [&](const char* what, const std::string& was, const std::string& now) {
    return InputError(spec_.display, fmt::format("changed on the server while being read ({} was {}, now {}): read it again", what, was, now));
  };
  std::lock_guard<std::mutex> lock(url_mu_);
  if (responses_++ == 0) {
    etag_ = resp.etag;
    last_modified_ = resp.last_modified;
    return;
  }
  if (etag_.empty()) etag_ = resp.etag;  // (a first response without one)
  else if (!resp.etag.empty() && resp.etag != etag_) throw changed("ETag", etag_, resp.etag);
  if (last_modified_.empty()) last_modified_ = resp.last_modified;
  else if (!resp.last_modified.empty() && resp.last_modified != last_modified_) throw changed("Last-Modified", last_modified_, resp.last_modified);
  const bool strong = !etag_.empty() && etag_.rfind("W/", 0) != 0;
  if (!strong && last_modified_.empty() && responses_ == 2) {
    stats_->unverified += 1;
    vfs::note_unverified(spec_.display);
  }
}

bool RemoteFile::marked(uint64_t b) const { return (bits_[b / 64].load(std::memory_order_acquire) >> (b % 64)) & 1; }

bool RemoteFile::block_present(uint64_t b) const {
  if (marked(b)) return true;
  return (b + 1) * kBlock <= head_.load(std::memory_order_acquire) || b * kBlock >= tail_.load(std::memory_order_acquire);
}

void RemoteFile::mark(uint64_t b0, uint64_t b1) const {
  for (uint64_t b = b0; b <= b1; ++b) bits_[b / 64].fetch_or(uint64_t{1} << (b % 64), std::memory_order_release);
}

bool RemoteFile::present(uint64_t off, uint64_t len) const {
  if (len == 0) return true;
  // What head_ and tail_ hold, then the blocks of the rest.
  const uint64_t lo = std::max(off, head_.load(std::memory_order_acquire));
  const uint64_t hi = std::min(off + len, tail_.load(std::memory_order_acquire));
  if (lo >= hi) return true;
  for (uint64_t b = lo / kBlock, e = (hi - 1) / kBlock; b <= e; ++b)
    if (!marked(b)) return false;
  return true;
}

// A request that fails once the file is open fails the read as the environment's (exit 4), never as the
// file's: a reader that takes an InputError for a malformed member and reads on must not take a network
// failure (or a file changed on the server) for one.
template <typename F>
void mid_read(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    throw EnvironmentError(e.render());
  }
}

void RemoteFile::ensure(const uint8_t* p, uint64_t len) const {
  if (len == 0 || p < buf_ || p >= buf_ + size_) return;
  const uint64_t off = static_cast<uint64_t>(p - buf_);
  len = std::min(len, size_ - off);
  if (present(off, len)) return;
  mid_read([&] { fill(off, len); });
}

void RemoteFile::fill(uint64_t off, uint64_t len) const {
  std::lock_guard<std::mutex> lock(fetch_mu_);
  if (!planned_) {
    planned_ = true;
    plan();
  }
  const uint64_t b0 = off / kBlock, b1 = (off + len - 1) / kBlock;
  if (present(off, len)) return;  // another thread fetched it while this one waited, or the plan did
  // Runs of missing blocks, each grown to the first range's size over missing neighbours (forwards, then
  // backwards where the file ends), never into a block present or taken by the next run.
  const uint64_t min_blocks = kFirstRange / kBlock;
  std::vector<std::pair<uint64_t, uint64_t>> runs = missing_runs(b0, b1);
  for (size_t i = 0; i < runs.size(); ++i) {
    auto& [x, y] = runs[i];
    const uint64_t limit = i + 1 < runs.size() ? runs[i + 1].first : blocks_;
    while (y - x + 1 < min_blocks && y + 1 < limit && !block_present(y + 1)) ++y;
    const uint64_t floor = i > 0 ? runs[i - 1].second + 1 : 0;
    while (y - x + 1 < min_blocks && x > floor && !block_present(x - 1)) --x;
  }
  fetch_runs(std::move(runs), kPart);
}

void RemoteFile::fetch_runs(std::vector<std::pair<uint64_t, uint64_t>> runs, uint64_t split) const {
  // Parts of at most kPart bytes, for a run longer than `split`.
  struct Part {
    uint64_t b0, b1;
  };
  std::vector<Part> parts;
  const uint64_t part_blocks = kPart / kBlock;
  for (auto [x, y] : runs) {
    if ((y - x + 1) * kBlock <= split) parts.push_back({x, y});
    else
      for (uint64_t s = x; s <= y; s += part_blocks) parts.push_back({s, std::min(y, s + part_blocks - 1)});
  }
  auto run_part = [&](const Part& pt) {
    // Bytes head_ or tail_ already hold are not fetched again (a reader may be reading them).
    const uint64_t first = std::max(pt.b0 * kBlock, head_.load());
    const uint64_t end = std::min({(pt.b1 + 1) * kBlock, size_, std::max(tail_.load(), first)});
    if (end > first) fetch(first, end - 1, buf_ + first);
    mark(pt.b0, pt.b1);
  };
  size_t start = 0;
  bool have_etag;
  {
    std::lock_guard<std::mutex> l(url_mu_);
    have_etag = !etag_.empty();
  }
  if (!have_etag && !parts.empty()) run_part(parts[start++]);  // the first response gives the ETag the rest check
  if (parts.size() - start <= 1) {
    for (size_t i = start; i < parts.size(); ++i) run_part(parts[i]);
    return;
  }
  std::atomic<size_t> next{start};
  std::atomic<bool> stop{false};
  const auto n = static_cast<unsigned>(std::min<size_t>(kParallel, parts.size() - start));
  run_threads(n, stop, [&](unsigned) {
    for (size_t i = next++; i < parts.size() && !stop; i = next++) run_part(parts[i]);
  });
}

std::vector<std::pair<uint64_t, uint64_t>> RemoteFile::missing_runs(uint64_t b0, uint64_t b1) const {
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  for (uint64_t b = b0; b <= b1; ++b) {
    if (block_present(b)) continue;
    uint64_t e = b;
    while (e + 1 <= b1 && !block_present(e + 1)) ++e;
    runs.emplace_back(b, e);
    b = e;
  }
  return runs;
}

void RemoteFile::fetch_span(uint64_t first, uint64_t end) const {
  end = std::min(end, size_);
  if (end > first) fetch_runs(missing_runs(first / kBlock, (end - 1) / kBlock), kPlanSplit);
}

void RemoteFile::plan() const {
  if (layout_ == Layout::kZip) plan_zip();
  else if (layout_ == Layout::kSafetensors) plan_safetensors();
}

namespace {
// The member a torch archive's reader reads first: ARCHIVE/data.pkl (torch.save, TorchScript).
bool top_data_pkl(std::string_view name) {
  const size_t slash = name.find('/');
  return name.substr(slash + 1) == "data.pkl" && name.find('/', slash + 1) == std::string_view::npos;
}
}  // namespace

void RemoteFile::plan_zip() const {
  if (size_ <= 2 * kFirstRange) return fetch_span(0, size_);  // one request for all of it
  if (tail_.load() == size_) fetch_span(size_ - kFirstRange, size_);
  const uint64_t t = size_ - kFirstRange;  // present, from open()'s suffix range or the span just fetched
  // Parsing only finds where things are: anything odd ends the plan, and the reader says what it is.
  std::optional<ZipEnd> end;
  try {
    end = read_zip_end(ByteView(buf_ + t, size_ - t, nullptr, t), t);
  } catch (const InputError&) {
    return;
  }
  if (!end || end->cd_size > kPlanMax) return;
  fetch_span(end->cd_offset, end->cd_offset + end->cd_size);
  try {
    Cursor c(ByteView(buf_ + end->cd_offset, end->cd_size, nullptr, end->cd_offset));
    for (uint64_t i = 0; i < end->count; ++i) {
      const ZipEntry e = read_central_record(c, i, end->cd_offset);
      if (!top_data_pkl(e.name)) continue;
      // Its local header (30 bytes, the name, an extra field of up to 64 KiB; torch's pads to 64 bytes), its
      // bytes, and the small records torch writes after it (.format_version, byteorder, ...).
      if (e.compressed_size <= kPlanMax) fetch_span(e.local_header_offset, e.local_header_offset + 30 + e.name.size() + e.compressed_size + 4096);
      return;
    }
  } catch (const InputError&) {
  }
}

void RemoteFile::plan_safetensors() const {
  // The first kSafetensorsFirst bytes (open() took them when it learnt the size), then the header's rest.
  auto head_to = [&](uint64_t end) {
    end = std::min(end, size_);
    const uint64_t h = head_.load();
    if (end <= h) return;
    fetch(h, end - 1, buf_ + h);
    head_.store(end, std::memory_order_release);
  };
  head_to(kSafetensorsFirst);
  if (size_ < 8) return;
  uint64_t n;
  std::memcpy(&n, buf_, 8);  // little-endian, as the format and this machine are
  if (n <= kPlanMax) head_to(8 + n);
}

void RemoteFile::read_at(uint8_t* dst, uint64_t len, uint64_t off) const {
  if (len == 0) return;
  if (off > size_ || len > size_ - off)
    throw InputError(spec_.display, "", off, fmt::format("read of {} bytes past the end of the file ({} bytes)", len, size_));
  if (present(off, len)) {
    std::memcpy(dst, buf_ + off, len);
    return;
  }
  mid_read([&] {
    for (uint64_t at = 0; at < len; at += kPart) fetch(off + at, off + std::min(len, at + kPart) - 1, dst + at);
  });
}

void RemoteFile::release(uint64_t off, uint64_t len) const {
  if (len == 0 || off >= size_) return;
  const uint64_t b0 = (off + kBlock - 1) / kBlock;
  const uint64_t end = std::min(off + len, size_);
  const uint64_t b1 = end == size_ ? blocks_ : end / kBlock;  // exclusive; the file's short last block counts whole
  if (b1 <= b0) return;
  std::lock_guard<std::mutex> lock(fetch_mu_);
  for (uint64_t b = b0; b < b1; ++b) bits_[b / 64].fetch_and(~(uint64_t{1} << (b % 64)), std::memory_order_release);
  if (head_.load() > b0 * kBlock) head_.store(b0 * kBlock);
  if (tail_.load() < std::min(b1 * kBlock, size_)) tail_.store(std::min(b1 * kBlock, size_));
  ::madvise(buf_ + b0 * kBlock, (b1 - b0) * kBlock, MADV_DONTNEED);
}

}  // namespace ckpt::remote
