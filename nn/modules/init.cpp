#include "nn/modules/init.hpp"

#include <cmath>
#include <string>

#include <fmt/format.h>

namespace xg::nn::init {

Tensor uniform_(Tensor t, double low, double high, Generator& gen) {
    if (!(low <= high)) fail("init::uniform_", fmt::format("low {} must not exceed high {}", low, high));
    if (!std::isfinite(low) || !std::isfinite(high)) {
        fail("init::uniform_", fmt::format("needs a finite range, got [{}, {})", low, high));
    }
    for (double& v : t.mutable_value()) v = gen.uniform(low, high);
    return t;
}

Tensor normal_(Tensor t, double mean, double std, Generator& gen) {
    if (!(std >= 0.0)) fail("init::normal_", fmt::format("std must be non-negative, got {}", std));
    for (double& v : t.mutable_value()) v = mean + std * gen.normal();
    return t;
}

Tensor constant_(Tensor t, double value) {
    for (double& v : t.mutable_value()) v = value;
    return t;
}

Tensor zeros_(Tensor t) { return constant_(std::move(t), 0.0); }
Tensor ones_(Tensor t) { return constant_(std::move(t), 1.0); }

std::pair<std::size_t, std::size_t> calculate_fan_in_and_fan_out(const Shape& shape) {
    if (shape.size() < 2) {
        fail("init::calculate_fan_in_and_fan_out",
             fmt::format("needs a tensor with at least 2 dims, got shape {}", shape_str(shape)));
    }
    std::size_t receptive = 1;
    for (std::size_t d = 2; d < shape.size(); ++d) receptive *= shape[d];
    return {shape[1] * receptive, shape[0] * receptive};
}

double calculate_gain(const std::string& nonlinearity, double param) {
    if (nonlinearity == "linear" || nonlinearity == "sigmoid" || nonlinearity == "identity") return 1.0;
    if (nonlinearity == "tanh") return 5.0 / 3.0;
    if (nonlinearity == "relu") return std::sqrt(2.0);
    if (nonlinearity == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
    fail("init::calculate_gain", fmt::format("unknown nonlinearity '{}'", nonlinearity));
}

Tensor kaiming_uniform_(Tensor t, double a, Generator& gen) {
    const std::size_t fan_in = calculate_fan_in_and_fan_out(t.shape()).first;
    if (fan_in == 0) fail("init::kaiming_uniform_", fmt::format("fan_in is 0 for shape {}", shape_str(t.shape())));
    const double bound = calculate_gain("leaky_relu", a) * std::sqrt(3.0 / static_cast<double>(fan_in));
    return uniform_(std::move(t), -bound, bound, gen);
}

Tensor xavier_uniform_(Tensor t, double gain, Generator& gen) {
    const auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(t.shape());
    if (fan_in + fan_out == 0) fail("init::xavier_uniform_", fmt::format("fans are 0 for shape {}", shape_str(t.shape())));
    const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
    return uniform_(std::move(t), -bound, bound, gen);
}

}  // namespace xg::nn::init
