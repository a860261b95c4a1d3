// LayerNorm, BatchNorm1d (with what BatchNorm2d shares) and RMSNorm modules over the fused kernels of nn/functional/functional.hpp.
#include <fmt/format.h>

#include "nn/modules/norm_layers.hpp"
#include "nn/modules/norm_state.hpp"

namespace xg::nn {

namespace {

// The normalised axes must be x's trailing axes; `op` names the module in the error.
void check_trailing(const char* op, const Tensor& x, const Shape& normalized) {
    const Shape s = x.shape();
    bool ok = s.size() >= normalized.size();
    for (std::size_t i = 0; ok && i < normalized.size(); ++i) ok = s[s.size() - normalized.size() + i] == normalized[i];
    if (!ok) {
        fail(op, fmt::format("input of shape {} does not end in normalized_shape {}", shape_str(s), shape_str(normalized)));
    }
}

void check_normalized_shape(const char* op, const Shape& normalized) {
    bool ok = !normalized.empty();
    for (std::size_t d : normalized) ok = ok && d > 0;
    if (!ok) fail(op, fmt::format("normalized_shape {} must be non-empty with positive sizes", shape_str(normalized)));
}

}  // namespace

// ---- LayerNorm ----------------------------------------------------------------------------------

LayerNorm::LayerNorm(Shape shape, double eps_, bool elementwise_affine) : normalized_shape(std::move(shape)), eps(eps_) {
    check_normalized_shape("LayerNorm", normalized_shape);
    if (elementwise_affine) {
        register_parameter("weight", weight, ones(normalized_shape));
        register_parameter("bias", bias, zeros(normalized_shape));
    }
}

LayerNorm::LayerNorm(std::int64_t n, double eps_, bool elementwise_affine)
    : LayerNorm(Shape{positive_size(n, "LayerNorm", "normalized_shape")}, eps_, elementwise_affine) {}

Tensor LayerNorm::forward(const Tensor& x) {
    check_trailing("LayerNorm", x, normalized_shape);
    return functional::layer_norm(x, normalized_shape, weight, bias, eps);
}

std::string LayerNorm::extra_repr() const {
    return fmt::format("{}, eps={}, elementwise_affine={}", shape_str(normalized_shape), eps, weight.defined());
}

// ---- what the normalisations with running statistics share (nn/modules/norm_state.hpp) ---------------

void detail::check_momentum(const char* module, const std::optional<double>& momentum) {
    if (momentum && !(*momentum >= 0.0 && *momentum <= 1.0)) {
        fail(module, fmt::format("momentum must be in [0, 1], got {}", *momentum));
    }
}

void detail::register_norm_state(Module& m, std::size_t c, bool affine, bool track, Parameter& weight, Parameter& bias,
                                 Tensor& running_mean, Tensor& running_var, Tensor& num_batches_tracked) {
    if (affine) {
        m.register_parameter("weight", weight, ones({c}));
        m.register_parameter("bias", bias, zeros({c}));
    }
    if (track) {
        running_mean = m.register_buffer("running_mean", zeros({c}));
        running_var = m.register_buffer("running_var", ones({c}));
        // int64 in PyTorch's state_dict, and so in the .npz files save() writes; float64 whatever the default dtype,
        // so it counts exactly to 2^53 (a float32 counter would stop at 2^24 batches)
        num_batches_tracked = m.register_buffer("num_batches_tracked", scalar(0.0, Dtype::Float64), BufferDtype::int64);
    }
}

// ---- BatchNormBase, BatchNorm1d -----------------------------------------------------------------

BatchNormBase::BatchNormBase(const char* module, std::int64_t channels, double eps_, std::optional<double> momentum_,
                             bool affine_, bool track)
    : num_features(positive_size(channels, module, "num_features")), eps(eps_), momentum(momentum_), affine(affine_),
      track_running_stats(track) {
    detail::check_momentum(module, momentum);
    detail::register_norm_state(*this, num_features, affine, track_running_stats, weight, bias, running_mean, running_var,
                                num_batches_tracked);
}

Tensor BatchNormBase::forward(const Tensor& x) {
    check_input_dim(x.shape());
    // Batch statistics in training, and in eval too when no running statistics exist (PyTorch).
    const bool use_batch_stats = is_training() || !track_running_stats;
    const bool update_running = is_training() && track_running_stats;
    const double batches = update_running ? num_batches_tracked.item() + 1.0 : 0.0;
    const double factor = !update_running ? 0.0 : momentum ? *momentum : 1.0 / batches;
    Tensor out = functional::batch_norm(x, running_mean, running_var, weight, bias, use_batch_stats, factor, eps);
    // Counted only once the batch went through, so a rejected batch leaves the state untouched.
    if (update_running) num_batches_tracked.mutable_value()() = batches;
    return out;
}

std::string BatchNormBase::extra_repr() const {
    return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features, eps,
                       momentum ? fmt::format("{}", *momentum) : std::string("None"), affine, track_running_stats);
}

BatchNorm1d::BatchNorm1d(std::int64_t channels, double eps_, std::optional<double> momentum_, bool affine_, bool track)
    : BatchNormBase("BatchNorm1d", channels, eps_, momentum_, affine_, track) {}

void BatchNorm1d::check_input_dim(const Shape& s) const {
    if ((s.size() != 2 && s.size() != 3) || s[1] != num_features) {
        fail("BatchNorm1d", fmt::format("expects input (N, {0}) or (N, {0}, L), got {1}", num_features, shape_str(s)));
    }
}

// ---- RMSNorm ------------------------------------------------------------------------------------

RMSNorm::RMSNorm(Shape shape, double eps_, bool elementwise_affine) : normalized_shape(std::move(shape)), eps(eps_) {
    check_normalized_shape("RMSNorm", normalized_shape);
    if (elementwise_affine) register_parameter("weight", weight, ones(normalized_shape));
}

RMSNorm::RMSNorm(std::int64_t n, double eps_, bool elementwise_affine)
    : RMSNorm(Shape{positive_size(n, "RMSNorm", "normalized_shape")}, eps_, elementwise_affine) {}

Tensor RMSNorm::forward(const Tensor& x) {
    check_trailing("RMSNorm", x, normalized_shape);
    return functional::rms_norm(x, normalized_shape, weight, eps);
}

std::string RMSNorm::extra_repr() const {
    return fmt::format("{}, eps={}, elementwise_affine={}", shape_str(normalized_shape), eps, weight.defined());
}

}  // namespace xg::nn
