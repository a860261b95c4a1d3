// xg::Dtype: the number format of a tensor's values, spelled as in libtorch (xg::kFloat64,
// xg::kFloat32), with PyTorch's promotion rule for ops that mix them.
//
// How float32 is kept (docs/precision.md): a float32 tensor stores its values and gradient as
// float32 (xg::FloatArray in Node::value32/grad32). Native float32 kernels read and write that
// storage; every other op reads the float64 view Tensor::value() (a mirror kept with the node)
// and record() rounds its result into float32. Either way results are float32 stores with float64
// arithmetic between them unless a kernel says otherwise: what a float32 kernel with float64
// accumulators gives.
#pragma once

#include <cstddef>
#include <string>

namespace xg {

/// A tensor's number format.
enum class Dtype { Float64, Float32 };

/// libtorch's spellings.
inline constexpr Dtype kFloat64 = Dtype::Float64;
inline constexpr Dtype kFloat32 = Dtype::Float32;
inline constexpr Dtype kDouble = Dtype::Float64;
inline constexpr Dtype kFloat = Dtype::Float32;

/// "float64" or "float32".
const char* dtype_name(Dtype dtype);

/// The dtype of tensors made without one (leaves, factories, braced lists): float64 unless
/// changed (torch.set_default_dtype). Per process; set it before making tensors.
Dtype default_dtype();
/// Sets the default dtype.
void set_default_dtype(Dtype dtype);

/// The dtype of an op on a and b: the wider of the two (float32 with float64 gives float64).
constexpr Dtype promote_types(Dtype a, Dtype b) {
    return a == Dtype::Float64 || b == Dtype::Float64 ? Dtype::Float64 : Dtype::Float32;
}

/// The unit roundoff u of a dtype (half the distance from 1 to the next number): every store
/// rounds with a relative error of at most u. float64 2^-53, float32 2^-24.
constexpr double unit_roundoff(Dtype dtype) {
    return dtype == Dtype::Float64 ? 1.1102230246251565e-16 : 5.9604644775390625e-08;
}

/// The storage types the kernels templated on T are compiled for: M(double) M(float). A kernel
/// file instantiates its templates with XG_FOR_EACH_STORAGE_TYPE(its instantiation macro), so a
/// new storage type is one entry here (nn/reference/<op>_signatures.inc).
#define XG_FOR_EACH_STORAGE_TYPE(M) M(double) M(float)

/// Rounds every value to the nearest float32 (ties to even; beyond float32's range to +-inf;
/// NaN stays NaN): the store of a float32 tensor.
void round_to_float32(double* values, std::size_t count);

}  // namespace xg
