#include "core/dtype.h"

#include <array>

namespace ckpt {
namespace {

using C = DTypeClass;
// Sizes from c10/core/ScalarType.h.
constexpr std::array<DType, 40> kDTypes{{
    {"float64", 8, C::Float, "DoubleStorage"},
    {"float32", 4, C::Float, "FloatStorage"},
    {"float16", 2, C::Float, "HalfStorage"},
    {"bfloat16", 2, C::Float, "BFloat16Storage"},
    {"int64", 8, C::Int, "LongStorage"},
    {"int32", 4, C::Int, "IntStorage"},
    {"int16", 2, C::Int, "ShortStorage"},
    {"int8", 1, C::Int, "CharStorage"},
    {"uint8", 1, C::Int, "ByteStorage"},
    {"bool", 1, C::Bool, "BoolStorage"},
    {"complex128", 16, C::Complex, "ComplexDoubleStorage"},
    {"complex64", 8, C::Complex, "ComplexFloatStorage"},
    {"complex32", 4, C::Complex, ""},
    {"qint8", 1, C::Quantized, "QInt8Storage"},
    {"quint8", 1, C::Quantized, "QUInt8Storage"},
    {"qint32", 4, C::Quantized, "QInt32Storage"},
    {"quint4x2", 1, C::Quantized, "QUInt4x2Storage", 2},
    {"quint2x4", 1, C::Quantized, "QUInt2x4Storage", 4},
    {"float8_e5m2", 1, C::Float, ""},
    {"float8_e4m3fn", 1, C::Float, ""},
    {"float8_e5m2fnuz", 1, C::Float, ""},
    {"float8_e4m3fnuz", 1, C::Float, ""},
    {"float8_e8m0fnu", 1, C::Float, ""},
    {"float4_e2m1fn_x2", 1, C::Float, ""},
    {"uint16", 2, C::Int, ""},
    {"uint32", 4, C::Int, ""},
    {"uint64", 8, C::Int, ""},
    {"bits1x8", 1, C::Bits, ""},
    {"bits2x4", 1, C::Bits, ""},
    {"bits4x2", 1, C::Bits, ""},
    {"bits8", 1, C::Bits, ""},
    {"bits16", 2, C::Bits, ""},
    {"uint1", 1, C::Int, ""},
    {"uint2", 1, C::Int, ""},
    {"uint3", 1, C::Int, ""},
    {"uint4", 1, C::Int, ""},
    {"uint5", 1, C::Int, ""},
    {"uint6", 1, C::Int, ""},
    {"uint7", 1, C::Int, ""},
    {"int4", 1, C::Int, ""},
}};

struct Alias {
  std::string_view alias, name;
};
constexpr std::array<Alias, 11> kAliases{{
    {"double", "float64"},
    {"float", "float32"},
    {"half", "float16"},
    {"long", "int64"},
    {"int", "int32"},
    {"short", "int16"},
    {"cdouble", "complex128"},
    {"cfloat", "complex64"},
    {"chalf", "complex32"},
    {"complex", "complex64"},
    {"cint", "int32"},
}};

}  // namespace

const DType* dtype_by_name(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return &d;
  for (const auto& a : kAliases)
    if (a.alias == name) return dtype_by_name(a.name);
  return nullptr;
}

const DType* dtype_by_storage_class(std::string_view cls) {
  if (cls.substr(0, 5) == "cuda.") cls.remove_prefix(5);
  for (const auto& d : kDTypes)
    if (!d.storage_class.empty() && d.storage_class == cls) return &d;
  return nullptr;
}

const DType* dtype_uint8() { return dtype_by_name("uint8"); }

}  // namespace ckpt
