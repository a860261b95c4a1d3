// xg::Dtype: the number format of a tensor's values, spelled as in libtorch (xg::kFloat64,
// xg::kFloat32, xg::kBFloat16), with PyTorch's promotion rule for ops that mix them.
//
// How the dtypes are kept (docs/precision.md): each dtype has one storage type (double, float,
// xg::bfloat16), listed once in XG_FOR_EACH_STORAGE_TYPE. A tensor keeps its values and gradient
// in its own storage type; kernels written as templates on the storage type T read and write it
// natively (arithmetic in float or double, each stored value rounded once). Tensor::value() reads
// any tensor as float64 (a narrower tensor's values widened into a mirror kept with the node), and
// record() rounds a float64 result into the result's dtype.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "core/engine/bfloat16.hpp"

namespace xg {

/// A tensor's number format.
enum class Dtype { Float64, Float32, BFloat16 };

/// libtorch's spellings.
inline constexpr Dtype kFloat64 = Dtype::Float64;
inline constexpr Dtype kFloat32 = Dtype::Float32;
inline constexpr Dtype kDouble = Dtype::Float64;
inline constexpr Dtype kFloat = Dtype::Float32;
inline constexpr Dtype kBFloat16 = Dtype::BFloat16;

/// "float64", "float32" or "bfloat16".
const char* dtype_name(Dtype dtype);

/// The dtype of tensors made without one (leaves, factories, braced lists): float64 unless
/// changed (torch.set_default_dtype). Per process; set it before making tensors.
Dtype default_dtype();
/// Sets the default dtype.
void set_default_dtype(Dtype dtype);

/// The dtype of an op on a and b: the wider of the two (float32 with float64 gives float64,
/// bfloat16 with float32 gives float32, as PyTorch).
constexpr Dtype promote_types(Dtype a, Dtype b) {
    if (a == Dtype::Float64 || b == Dtype::Float64) return Dtype::Float64;
    return a == Dtype::Float32 || b == Dtype::Float32 ? Dtype::Float32 : Dtype::BFloat16;
}

/// The unit roundoff u of a dtype (half the distance from 1 to the next number): every store
/// rounds with a relative error of at most u. float64 2^-53, float32 2^-24, bfloat16 2^-8.
constexpr double unit_roundoff(Dtype dtype) {
    return dtype == Dtype::Float64 ? 1.1102230246251565e-16 : dtype == Dtype::Float32 ? 5.9604644775390625e-08 : 0.00390625;
}

/// The storage types, one per dtype, that the kernels templated on T are compiled for. A kernel
/// file instantiates its templates with XG_FOR_EACH_STORAGE_TYPE(its instantiation macro), so a
/// new storage type is one entry here, one in Dtype and one in StorageOf below
/// (nn/reference/<op>_signatures.inc).
#define XG_FOR_EACH_STORAGE_TYPE(M) M(double) M(float) M(::xg::bfloat16)

/// The dtype whose storage type is T (dtype_of<double>() == kFloat64).
template <class T>
constexpr Dtype dtype_of() {
    static_assert(std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, bfloat16>,
                  "dtype_of<T>: T is a storage type (double, float, xg::bfloat16)");
    return std::is_same_v<T, double> ? Dtype::Float64 : std::is_same_v<T, float> ? Dtype::Float32 : Dtype::BFloat16;
}

/// A storage type as a value, for f(StorageOf<T>{}) (with_storage_type below).
template <class T>
struct StorageOf {
    using type = T;
};

/// f(StorageOf<T>{}) for dtype's storage type T: the one place a dtype becomes a type.
template <class F>
decltype(auto) with_storage_type(Dtype dtype, F&& f) {
    switch (dtype) {
        case Dtype::Float32: return f(StorageOf<float>{});
        case Dtype::BFloat16: return f(StorageOf<bfloat16>{});
        case Dtype::Float64: break;
    }
    return f(StorageOf<double>{});
}

/// What the arithmetic of a kernel on storage type T is written in when it is not double: T
/// itself for double and float, float for bfloat16 (which only stores).
template <class T>
using ArithmeticOf = std::conditional_t<std::is_same_v<T, bfloat16>, float, T>;

/// Rounds every value to the nearest float32 (ties to even; beyond float32's range to +-inf;
/// NaN stays NaN): the store of a float32 tensor.
void round_to_float32(double* values, std::size_t count);

}  // namespace xg
