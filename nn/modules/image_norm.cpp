// BatchNorm2d, GroupNorm and InstanceNorm2d modules over the fused kernels of nn/functional/functional.hpp.
#include "nn/modules/image_norm.hpp"
#include "nn/modules/norm_state.hpp"

#include <fmt/format.h>

namespace xg::nn {

// ---- BatchNorm2d (the rest is BatchNormBase, nn/modules/norm_layers.cpp) ------------------------------

BatchNorm2d::BatchNorm2d(std::int64_t c, double eps_, std::optional<double> momentum_, bool affine_, bool track)
    : BatchNormBase("BatchNorm2d", c, eps_, momentum_, affine_, track) {}

void BatchNorm2d::check_input_dim(const Shape& s) const {
    if (s.size() != 4 || s[1] != num_features) {
        fail("BatchNorm2d", fmt::format("expects input (N, {}, H, W), got {}", num_features, shape_str(s)));
    }
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
    detail::check_momentum("InstanceNorm2d", momentum);
    detail::register_norm_state(*this, num_features, affine, track_running_stats, weight, bias, running_mean, running_var, num_batches_tracked);
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
