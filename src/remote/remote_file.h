// A remote file read with HTTP range requests into a block cache (bytes.h's Fetcher, mapped_file.h's
// FileSource). The buffer is an anonymous mapping as large as the file (MAP_NORESERVE: only the pages
// fetched take memory); a bitmap of 64 KiB blocks says what is present, and so do two byte-exact bounds:
// the bytes before `head` and from `tail` to the end (what the first requests fetched).
//
// The first requests follow the format the file's name says, before the reader asks for anything:
//  - a zip (.pt .pth .bin .ckpt .pt2 .ptl .zip): its last 256 KiB (the end records, a suffix range when
//    the size is not known yet), then what of the central directory that did not hold, then the whole
//    data.pkl and the records right after it (its place is in the directory): a torch.save summary is at
//    most these 3 requests whatever the pickle's size (a file up to 512 KiB: at most 2);
//  - safetensors: the first 100,000 bytes (huggingface_hub's get_safetensors_metadata asks for as
//    many), then the rest of the header exactly, its size being in the first 8 bytes;
//  - anything else: the first 256 KiB.
// A zip or safetensors file that is not what its name says costs one request more, nothing else.
// Later reads fetch what is missing, at least 256 KiB at a time (grown towards the end of the file when
// it meets it), neighbouring missing blocks coalesced into one request, a large span cut into 8 MiB parts
// fetched on up to 8 connections at once. Every request after the first carries If-Range with the first
// strong ETag, and every response's size, ETag and Last-Modified are compared with the first's: a file
// that changes between two requests is an error, never a mix of two versions. A server that gives
// neither a strong ETag nor a Last-Modified is noted (vfs::note_unverified) once the file takes a second
// response. A server that ignores Range sends the whole file into the cache's own buffer: held once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/mapped_file.h"
#include "core/vfs.h"
#include "remote/http.h"

namespace ckpt::remote {

inline constexpr uint64_t kBlock = 64 << 10;
inline constexpr uint64_t kFirstRange = 256 << 10;
inline constexpr uint64_t kPart = 8 << 20;
inline constexpr unsigned kParallel = 8;
inline constexpr uint64_t kSafetensorsFirst = 100'000;
// The first requests' plans fetch a central directory, a data.pkl or a safetensors header only up to this
// size (past it the reader's own reads fetch what it reads), and cut a span into kPart parts only above it.
inline constexpr uint64_t kPlanMax = 256ull << 20;
inline constexpr uint64_t kPlanSplit = 64ull << 20;

// What the first requests fetch (see above), by the file's name.
enum class Layout { kOther, kZip, kSafetensors };
Layout layout_of(const std::string& url);

struct FileSpec {
  std::string url;  // what is requested
  std::string display;  // what errors say
  std::shared_ptr<const Auth> auth;
  uint64_t size = UINT64_MAX;  // known from a listing; else the first request learns it
};

class RemoteFile : public FileSource {
 public:
  // With the size unknown, fetches the first range now (the size, the ETag, the bytes a format is told
  // apart by); with it known, nothing until the first read. The rest of the plan runs at the first read.
  static std::shared_ptr<RemoteFile> open(FileSpec spec);
  ~RemoteFile() override;

  void ensure(const uint8_t* p, uint64_t len) const override;
  const uint8_t* base() const override { return buf_; }
  uint64_t size() const override { return size_; }
  void read_at(uint8_t* dst, uint64_t len, uint64_t off) const override;
  void release(uint64_t off, uint64_t len) const override;
  bool present(uint64_t off, uint64_t len) const override;

 private:
  RemoteFile() = default;
  void allocate(uint64_t size);  // the cache for a file of `size` bytes (again: the old one goes)
  // Checks one response against the first (size, ETag, Last-Modified) and notes the first's validators.
  void validate(const Response& resp) const;
  // GET [first, last] into dst; checks the size and ETag against the first response's.
  void fetch(uint64_t first, uint64_t last, uint8_t* dst) const;
  void mark(uint64_t first_block, uint64_t last_block) const;
  void note_redirect(const std::string& effective) const;
  void fill(uint64_t off, uint64_t len) const;  // ensure()'s fetch of what is missing
  // Fetches the blocks of each run [first, last] (missing ones), clipped to what head_ and tail_ do not
  // hold; runs longer than `split` bytes in kPart parts on up to kParallel connections. Under fetch_mu_.
  void fetch_runs(std::vector<std::pair<uint64_t, uint64_t>> runs, uint64_t split) const;
  // Fetches what is missing of [first, end): one request per missing run, nothing more. Under fetch_mu_.
  void fetch_span(uint64_t first, uint64_t end) const;
  // The first requests (see above); once, under fetch_mu_, before the first read's own.
  void plan() const;
  void plan_zip() const;
  void plan_safetensors() const;
  // Takes a response's bytes at `at` (the first request's, in a buffer of its own) as present.
  void take_first(const uint8_t* bytes, uint64_t at, uint64_t len);
  bool marked(uint64_t b) const;  // the bitmap's bit alone
  bool block_present(uint64_t b) const;  // marked, or wholly within head_ / tail_
  // The runs [first, last] of blocks in [b0, b1] not present.
  std::vector<std::pair<uint64_t, uint64_t>> missing_runs(uint64_t b0, uint64_t b1) const;
  // A ranged request of the file as it stands (URL after redirects, credentials, If-Range); `keep` holds
  // the credentials it points to.
  Request request(uint64_t first, uint64_t last, uint8_t* dst, std::shared_ptr<const Auth>* keep) const;

  FileSpec spec_;
  mutable std::string url_;  // the redirect's target once known (a CDN), so later ranges skip the redirect
  mutable std::shared_ptr<const Auth> auth_;  // dropped when url_ moved to another host
  mutable std::string etag_, last_modified_;
  mutable uint64_t responses_ = 0;
  mutable std::mutex url_mu_;  // url_, auth_, etag_, last_modified_, responses_
  uint8_t* buf_ = nullptr;
  uint64_t size_ = 0, map_bytes_ = 0, blocks_ = 0;
  Layout layout_ = Layout::kOther;
  mutable bool planned_ = false;  // under fetch_mu_
  // Bytes [0, head_) and [tail_, size_) are present whatever their blocks say (a first request's bytes, not
  // block-aligned). Raised (lowered) under fetch_mu_ after the bytes are written; read by present().
  mutable std::atomic<uint64_t> head_{0}, tail_{0};
  std::atomic<uint64_t>* bits_ = nullptr;  // zero pages mapped lazily: a claimed 64 TiB costs no memory until read
  uint64_t bits_bytes_ = 0;
  mutable std::mutex fetch_mu_;  // one ensure() fetching at a time (its parts run in parallel)
  std::shared_ptr<vfs::Transfer> stats_;
};

}  // namespace ckpt::remote
