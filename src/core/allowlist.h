// What ckpt knows about pickle globals, as data: the allowlist of callables that are safe to call the
// way torch files call them (torch's weights_only allowlists of 1.13 and 2.6, the tensor rebuild
// functions, and a few vetted extras, each with its reason), and the denylist categories that only
// sharpen a dangerous-global message ("runs a shell command"). The verdict itself is security.cc's: a
// global called or built with state that is not allowed here is dangerous, whatever its category.
#pragma once

#include <cstdint>
#include <string_view>

namespace ckpt {

struct AllowEntry {
  // "module.name"; a trailing '*' matches any rest of the qualified name, and two special patterns
  // stand for families that dtype.cc enumerates: "torch.<dtype>" and "torch.<Storage>" (also under
  // torch.cuda / torch.sparse / torch.cuda.sparse as torch writes them).
  const char* pattern;
  // Positions of arguments the callable itself calls or instantiates (bit k = argument k), such as
  // _rebuild_from_type_v2(func, type, args, state): a global passed there counts as called.
  uint8_t calls_args;
  bool torch;  // on torch's own weights_only allowlist (torch.load(weights_only=True) accepts it)
  const char* reason;
};

// The entry allowing module.name, or nullptr.
const AllowEntry* allowed_global(std::string_view module, std::string_view name);

// builtins.getattr(module.cls, 'member') as Python pickles an Enum member (Enum.__reduce_ex__): the reason
// when that exact lookup is known to be safe (the class on the allowlist, the member one it has), else
// nullptr. The pickle machine records such a call as kUseMemberLookup instead of a call.
const char* allowed_member_lookup(std::string_view module, std::string_view cls, std::string_view member);

// A short phrase naming what the global does when called ("runs a shell command"), or nullptr when
// it is on none of the scanners' denylists (picklescan, modelscan, fickling, modelaudit).
const char* deny_category(std::string_view module, std::string_view name);

}  // namespace ckpt
