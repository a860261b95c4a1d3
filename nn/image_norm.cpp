// BatchNorm2d, GroupNorm and InstanceNorm2d modules over the fused kernels of nn/functional.hpp.
#include "nn/image_norm.hpp"

#include <fmt/format.h>

namespace xg::nn {

namespace {

void check_features(const char* op, const std::optional<double>& momentum) {
    if (momentum && !(*momentum >= 0.0 && *momentum <= 1.0)) fail(op, fmt::format("momentum must be in [0, 1], got {}", *momentum));
}

// What a module with running statistics does around one forward: which statistics to use, the
// update factor (momentum, or 1 / batches for a cumulative average), and the count to store once
// the batch went through (so a rejected batch leaves the state untouched).
struct RunningStep {
    bool use_input_stats, update;
    double batches, factor;
};

RunningStep running_step(bool training, bool track, const Tensor& num_batches_tracked, const std::optional<double>& momentum) {
    RunningStep s{training || !track, training && track, 0.0, 0.0};
    if (s.update) {
        s.batches = num_batches_tracked.item() + 1.0;
        s.factor = momentum ? *momentum : 1.0 / s.batches;
    }
    return s;
}

// weight (ones) and bias (zeros) when affine, running_mean (zeros), running_var (ones) and
// num_batches_tracked (0) when tracking: _NormBase's registrations, under PyTorch's names.
void register_norm_state(Module& m, std::size_t c, bool affine, bool track, Parameter& weight, Parameter& bias,
                         Tensor& running_mean, Tensor& running_var, Tensor& num_batches_tracked) {
    if (affine) {
        m.register_parameter("weight", weight, ones({c}));
        m.register_parameter("bias", bias, zeros({c}));
    }
    if (track) {
        running_mean = m.register_buffer("running_mean", zeros({c}));
        running_var = m.register_buffer("running_var", ones({c}));
        // int64 in PyTorch's state_dict, and so in the .npz files save() writes
        num_batches_tracked = m.register_buffer("num_batches_tracked", scalar(0.0), Dtype::int64);
    }
}

std::string momentum_str(const std::optional<double>& momentum) {
    return momentum ? fmt::format("{}", *momentum) : std::string("None");
}

}  // namespace

// ---- BatchNorm2d --------------------------------------------------------------------------------

BatchNorm2d::BatchNorm2d(std::int64_t c, double eps_, std::optional<double> momentum_, bool affine_, bool track)
    : num_features(positive_size(c, "BatchNorm2d", "num_features")), eps(eps_), momentum(momentum_), affine(affine_),
      track_running_stats(track) {
    check_features("BatchNorm2d", momentum);
    register_norm_state(*this, num_features, affine, track_running_stats, weight, bias, running_mean, running_var, num_batches_tracked);
}

Tensor BatchNorm2d::forward(const Tensor& x) {
    const Shape s = x.shape();
    if (s.size() != 4 || s[1] != num_features) {
        fail("BatchNorm2d", fmt::format("expects input (N, {}, H, W), got {}", num_features, shape_str(s)));
    }
    const RunningStep step = running_step(is_training(), track_running_stats, num_batches_tracked, momentum);
    Tensor out = functional::batch_norm(x, running_mean, running_var, weight, bias, step.use_input_stats, step.factor, eps);
    if (step.update) num_batches_tracked.mutable_value()() = step.batches;
    return out;
}

std::string BatchNorm2d::extra_repr() const {
    return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features, eps, momentum_str(momentum),
                       affine, track_running_stats);
}

// ---- GroupNorm ----------------------------------------------------------------------------------

GroupNorm::GroupNorm(std::int64_t groups_, std::int64_t channels_, double eps_, bool affine_)
    : num_groups(positive_size(groups_, "GroupNorm", "num_groups")),
      num_channels(positive_size(channels_, "GroupNorm", "num_channels")), eps(eps_), affine(affine_) {
    const std::size_t groups = num_groups, channels = num_channels;
    if (channels % groups != 0) {
        fail("GroupNorm", fmt::format("num_channels ({}) must be a positive multiple of num_groups ({})", channels, groups));
    }
    if (affine) {
        register_parameter("weight", weight, ones({channels}));
        register_parameter("bias", bias, zeros({channels}));
    }
}

Tensor GroupNorm::forward(const Tensor& x) {
    const Shape s = x.shape();
    if (s.size() < 2 || s[1] != num_channels) {
        fail("GroupNorm", fmt::format("expects input (N, {}, *), got {}", num_channels, shape_str(s)));
    }
    return functional::group_norm(x, static_cast<std::int64_t>(num_groups), weight, bias, eps);
}

std::string GroupNorm::extra_repr() const { return fmt::format("{}, {}, eps={}, affine={}", num_groups, num_channels, eps, affine); }

// ---- InstanceNorm2d -----------------------------------------------------------------------------

InstanceNorm2d::InstanceNorm2d(std::int64_t c, double eps_, double momentum_, bool affine_, bool track)
    : num_features(positive_size(c, "InstanceNorm2d", "num_features")), eps(eps_), momentum(momentum_), affine(affine_),
      track_running_stats(track) {
    check_features("InstanceNorm2d", momentum);
    register_norm_state(*this, num_features, affine, track_running_stats, weight, bias, running_mean, running_var, num_batches_tracked);
}

Tensor InstanceNorm2d::forward(const Tensor& x) {
    const Shape s = x.shape();
    if (s.size() == 3) return squeeze(forward(unsqueeze(x, 0)), 0);  // unbatched (C, H, W)
    if (s.size() != 4 || ((affine || track_running_stats) && s[1] != num_features)) {
        fail("InstanceNorm2d", fmt::format("expects input (N, {0}, H, W) or (C, H, W), got {1}", num_features, shape_str(s)));
    }
    // Batch statistics in training, and in eval too when no running statistics exist (PyTorch).
    const bool use_input_stats = is_training() || !track_running_stats;
    return functional::instance_norm(x, running_mean, running_var, weight, bias, use_input_stats, momentum, eps);
}

std::string InstanceNorm2d::extra_repr() const {
    return fmt::format("{}, eps={}, momentum={}, affine={}, track_running_stats={}", num_features, eps, momentum, affine,
                       track_running_stats);
}

}  // namespace xg::nn
