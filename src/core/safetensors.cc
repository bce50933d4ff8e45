#include "core/safetensors.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <unordered_set>

#include "core/fast_json.h"
#include "core/storage.h"
#include "core/torch_pickle.h"

namespace ckpt {
namespace {

struct StDType {
  std::string_view st, torch;
};
constexpr std::array<StDType, 20> kStDTypes{{
    {"BOOL", "bool"},
    {"U8", "uint8"},
    {"I8", "int8"},
    {"I16", "int16"},
    {"U16", "uint16"},
    {"F16", "float16"},
    {"BF16", "bfloat16"},
    {"I32", "int32"},
    {"U32", "uint32"},
    {"F32", "float32"},
    {"C64", "complex64"},
    {"F64", "float64"},
    {"I64", "int64"},
    {"U64", "uint64"},
    {"F8_E5M2", "float8_e5m2"},
    {"F8_E4M3", "float8_e4m3fn"},
    {"F8_E8M0", "float8_e8m0fnu"},
    {"F8_E4M3FNUZ", "float8_e4m3fnuz"},
    {"F8_E5M2FNUZ", "float8_e5m2fnuz"},
    {"F4", "float4_e2m1fn_x2"},
}};

constexpr uint64_t kMaxHeader = 100'000'000;  // the reference implementation's MAX_HEADER_SIZE

// The full reading of a header, naming every problem (fast_json.h takes only the ordinary shape).
SafetensorsHeader read_header(const ByteView& header, std::string_view text, const Limits& limits) {
  // Duplicate names are invalid, but a JSON object keeps only the last: a first SAX pass over the header
  // records the top-level keys in the file's order (and __metadata__'s own), catching duplicates; then
  // the header is parsed into a sorted map. (nlohmann's ordered_json inserts with a linear search, and
  // its callback parser rescans the parent object after every child: 100,000 tensors took minutes.)
  struct KeyOrder : nlohmann::json::json_sax_t {
    int depth = 0;
    std::unordered_set<std::string> seen, metadata_seen;
    std::vector<std::string> keys, metadata_keys;
    std::string duplicate;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return ++depth, true; }
    bool end_object() override { return --depth, true; }
    bool start_array(std::size_t) override { return ++depth, true; }
    bool end_array() override { return --depth, true; }
    bool key(string_t& k) override {
      if (depth == 1) {
        if (!seen.insert(k).second) {
          if (duplicate.empty()) duplicate = k;
        } else {
          keys.push_back(k);
        }
      } else if (depth == 2 && !keys.empty() && keys.back() == "__metadata__" && metadata_seen.insert(k).second) {
        metadata_keys.push_back(k);
      }
      return true;
    }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
  } order_of;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) { header.fail(e.byte > 0 ? e.byte - 1 : 0, "header is not valid JSON"); }
  // A number too large for a double (1e999) throws out_of_range, not parse_error (fuzz_json).
  catch (const nlohmann::json::out_of_range&) { header.fail(0, "header is not valid JSON: a number out of range"); }
  nlohmann::json::sax_parse(text.begin(), text.end(), &order_of);
  std::string& duplicate = order_of.duplicate;
  auto names = std::make_shared<const std::vector<std::string>>(std::move(order_of.keys));  // the entries view them
  const std::vector<std::string>& keys = *names;
  const std::vector<std::string>& metadata_keys = order_of.metadata_keys;
  if (!duplicate.empty()) header.fail(0, fmt::format("duplicate tensor name '{}' in the header", duplicate));
  if (!j.is_object()) header.fail(0, "header is not a JSON object");

  SafetensorsHeader out;
  out.strings = names;
  std::vector<SafetensorsEntry>& entries = out.entries;
  for (const std::string& name : keys) {
    const auto& v = j.at(name);
    if (name == "__metadata__") {
      if (!v.is_object()) header.fail(0, "__metadata__ is not an object of strings");
      for (auto m = v.begin(); m != v.end(); ++m)
        if (!m->is_string()) header.fail(0, fmt::format("__metadata__ value '{}' is not a string", m.key()));
      auto& md = out.metadata.emplace();
      for (const std::string& k : metadata_keys) md.emplace_back(k, v.at(k).get<std::string>());
      continue;
    }
    if (entries.size() >= limits.tensors) header.fail(0, fmt::format("more than {} tensors", limits.tensors));
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") || !v.contains("data_offsets"))
      header.fail(0, fmt::format("tensor '{}' lacks dtype, shape or data_offsets", name));
    const auto& dt = v["dtype"];
    const DType* dtype = nullptr;
    if (dt.is_string())
      for (const auto& d : kStDTypes)
        if (d.st == dt.get<std::string>()) dtype = dtype_by_name(d.torch);
    if (!dtype) header.fail(0, fmt::format("tensor '{}' has unknown dtype {}", name, dt.dump()));
    SafetensorsEntry e{name, dtype, {}, 1, 0, 0};
    if (!v["shape"].is_array()) header.fail(0, fmt::format("tensor '{}': shape is not a list", name));
    for (const auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        header.fail(0, fmt::format("tensor '{}': shape {} holds a negative or non-integer size", name, v["shape"].dump()));
      e.shape.push_back(d.get<int64_t>());
      if (mul_overflows(e.numel, static_cast<uint64_t>(d.get<int64_t>()), &e.numel) || e.numel > (1ull << 62))
        header.fail(0, fmt::format("tensor '{}': shape {} overflows", name, v["shape"].dump()));
    }
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      header.fail(0, fmt::format("tensor '{}': data_offsets is not [begin, end]", name));
    e.begin = off[0].get<uint64_t>();
    e.end = off[1].get<uint64_t>();
    // F4 counts 4-bit values (two per byte); every other dtype whole elements.
    const bool nibbles = dt.get<std::string>() == "F4";
    if (nibbles && e.numel % 2)
      header.fail(0, fmt::format("tensor '{}': F4 shape {} holds an odd number of values", name, v["shape"].dump()));
    const uint64_t need = nibbles ? e.numel / 2 : dtype_bytes(*dtype, e.numel);
    if (e.end < e.begin || e.end - e.begin != need)
      header.fail(0, fmt::format("tensor '{}': data_offsets [{}, {}] span {} bytes but shape {} of {} needs {}", name, e.begin,
                                 e.end, e.end >= e.begin ? e.end - e.begin : 0, v["shape"].dump(), dtype->name, need));
    entries.push_back(std::move(e));
  }
  return out;
}

// The same entries from simdjson's reading, or nullopt where anything is off (read_header then says what).
std::optional<SafetensorsHeader> read_header_fast(std::string_view text, const Limits& limits, bool check_repeats,
                                                  size_t readable, std::shared_ptr<void>* reuse) {
  std::optional<FastSafetensorsHeader> h = fast_safetensors_header(text, check_repeats, readable, reuse);
  if (!h || h->tensors.size() > limits.tensors) return std::nullopt;
  SafetensorsHeader out;
  out.entries.reserve(h->tensors.size());
  std::string_view last_st;  // a header holds a few dtypes: each looked up once per run of it
  const DType* last = nullptr;
  for (FastTensorEntry& t : h->tensors) {
    const DType* dtype = last && t.dtype == last_st ? last : nullptr;
    for (size_t k = 0; !dtype && k < kStDTypes.size(); ++k)
      if (kStDTypes[k].st == t.dtype) dtype = dtype_by_name(kStDTypes[k].torch);
    if (!dtype) return std::nullopt;
    last_st = t.dtype;
    last = dtype;
    SafetensorsEntry e{t.name, dtype, std::move(t.shape), 1, t.begin, t.end};
    for (const int64_t d : e.shape)
      if (mul_overflows(e.numel, static_cast<uint64_t>(d), &e.numel) || e.numel > (1ull << 62)) return std::nullopt;
    const bool nibbles = t.dtype == "F4";
    if (nibbles && e.numel % 2) return std::nullopt;
    const uint64_t need = nibbles ? e.numel / 2 : dtype_bytes(*dtype, e.numel);
    if (e.end < e.begin || e.end - e.begin != need) return std::nullopt;
    out.entries.push_back(std::move(e));
  }
  out.metadata = std::move(h->metadata);
  out.strings = std::move(h->strings);
  return out;
}

// The header's text, its length checked against the limits and the file.
std::string_view header_text(const ByteView& f, const Limits& limits) {
  const uint64_t n = f.le<uint64_t>(0);
  if (n > kMaxHeader || n > limits.string_bytes)
    f.fail(0, fmt::format("safetensors header length {} exceeds the limit of {} bytes", n,
                          std::min(kMaxHeader, limits.string_bytes)));
  if (n > f.size() - 8) f.fail(0, fmt::format("safetensors header length {} exceeds the {} bytes after it", n, f.size() - 8));
  return f.str(8, n);
}

// The entries put in data order (stable: zero-length tensors at one offset keep the header's order),
// checked to tile the data region exactly.
void tile(SafetensorsHeader& h, const ByteView& f) {
  const uint64_t n = h.data_start - 8;
  const ByteView header = f.sub(8, n).as_member("header");
  std::vector<SafetensorsEntry>& entries = h.entries;
  auto before = [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  };
  if (!std::is_sorted(entries.begin(), entries.end(), before)) std::stable_sort(entries.begin(), entries.end(), before);
  uint64_t at = 0;
  for (const SafetensorsEntry& e : entries) {
    if (e.begin > at)
      header.fail(0, fmt::format("gap of {} bytes before tensor '{}' at data offset {}", e.begin - at, e.name, at));
    if (e.begin < at)
      header.fail(0, fmt::format("tensor '{}' at data offset {} overlaps the tensor before it (which ends at {})", e.name,
                                 e.begin, at));
    at = e.end;
  }
  const uint64_t data_size = f.size() - h.data_start;
  if (at > data_size) f.fail(f.size(), fmt::format("data ends at {} bytes but the tensors need {} (truncated)", data_size, at));
  if (at < data_size) f.fail(h.data_start + at, fmt::format("{} trailing bytes after the last tensor", data_size - at));
}

}  // namespace

bool looks_like_safetensors(const ByteView& f) {
  // A JSON object right after a plausible length; an over-long length is then refused with its reason.
  return f.size() >= 9 && (f.le<uint64_t>(0) >> 48) == 0 && f.u8(8) == '{';
}

std::optional<SafetensorsHeader> read_safetensors_header_fast(const ByteView& f, const Limits& limits, bool check_repeats,
                                                              const MappedFile* file, std::shared_ptr<void>* reuse) {
  const std::string_view text = header_text(f, limits);
  const size_t readable = file ? file->readable_from(reinterpret_cast<const uint8_t*>(text.data())) : 0;
  std::optional<SafetensorsHeader> h = read_header_fast(text, limits, check_repeats, readable, reuse);
  if (!h) return std::nullopt;
  h->data_start = 8 + text.size();
  tile(*h, f);
  return h;
}

void safetensors_records(SafetensorsEntry& e, uint64_t data_start, std::string key, Tensor& t, Storage& s) {
  t.name = e.name;
  t.dtype = e.dtype;
  t.stride = contiguous_strides(e.shape);
  t.shape = std::move(e.shape);
  t.numel = static_cast<int64_t>(e.numel);
  t.bytes = e.end - e.begin;
  s.key = std::move(key);
  t.storage = s.key;  // one copy of the key between them
  t.device = "cpu";
  s.dtype = e.dtype;
  s.numel = e.numel;
  s.nbytes = e.end - e.begin;
  s.device = "cpu";
  s.file_offset = data_start + e.begin;
  s.present = true;
  s.in_model = true;
}

void read_safetensors(Checkpoint& ck, const Input& in, const Limits& limits) {
  const ByteView f = in.file->view();
  ck.format = Format::Safetensors;
  ck.container = Container::Safetensors;
  ck.content = Content::StateDict;
  std::optional<SafetensorsHeader> fast = read_safetensors_header_fast(f, limits, true, in.file.get());
  SafetensorsHeader h;
  if (fast) {
    h = std::move(*fast);
  } else {
    const std::string_view text = header_text(f, limits);
    h = read_header(f.sub(8, text.size()).as_member("header"), text, limits);
    h.data_start = 8 + text.size();
    tile(h, f);
  }
  ck.records.emplace_back("header_bytes", std::to_string(h.data_start - 8));
  ck.safetensors_metadata = std::move(h.metadata);
  ck.tensors.resize(h.entries.size());
  ck.storages.resize(h.entries.size());
  for (size_t k = 0; k < h.entries.size(); ++k)
    safetensors_records(h.entries[k], h.data_start, std::string(h.entries[k].name), ck.tensors[k], ck.storages[k]);
  ck.own_storages = true;  // each key is its tensor's name, once in the header
  infer_kinds(ck.tensors);
  mark_plain_tensors(ck);
}

}  // namespace ckpt
