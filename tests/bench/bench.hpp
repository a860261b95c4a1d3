// Shared between the benchmark's translation units: the list of workloads and how each side
// builds one. The libtorch side lives in its own file so <torch/torch.h> (slow to compile) is
// only parsed when libtorch was found.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace xg::bench {

enum class Kind { layer_norm, batch_norm, gelu, linear, mlp_layer_norm, mlp_batch_norm, transformer_block, conv2d, lstm, group_norm, rms_norm, layer_norm_by_hand };

/// One row of the table. dims: (rows, width) for the element-wise/norm kernels,
/// (batch, in, out) for linear, (batch, ...) for the models, (N, C, O, H, W, kernel, padding) for
/// conv2d, (T, B, input, hidden) for lstm, (N, C, H, W, groups) for group_norm.
struct Workload {
    Kind kind;
    std::string name;
    std::vector<std::size_t> dims;
    double target_ratio;    ///< xgrad/libtorch must stay at or below this
    double bytes = 0.0;     ///< bytes a fwd+bwd must move (0: not a bandwidth-bound kernel)
    bool float32 = false;   ///< both sides in float32 (xg::kFloat32, torch::kFloat32); else float64
};

/// One timed call: a fresh forward + backward (and, for the training steps, zero_grad and the
/// optimizer step). Built once per workload with its inputs and parameters captured.
using Run = std::function<void()>;

/// The threads both sides run on (--threads=N, default 1).
int bench_threads();

/// Same input data for both sides: values drawn once from a seeded generator.
std::vector<double> bench_data(std::size_t n, unsigned seed);

/// The float32 rows end their names with this.
inline const char* const kFloat32Suffix = ", float32";

Run make_xgrad_run(const Workload& w);
/// Only defined when libtorch was found (XGRAD_BENCH_HAVE_TORCH).
Run make_torch_run(const Workload& w);
/// "libtorch 1.13.1 (OpenBLAS ...)" or similar, for the machine line.
std::string torch_description();

}  // namespace xg::bench
