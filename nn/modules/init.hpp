// Parameter initialisers with PyTorch's names and formulas (torch.nn.init). Each overwrites the
// tensor's storage in place (outside the graph) and returns the same handle. Samples come from
// xg::default_generator() unless a generator is given, in row-major element order.
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "core/engine/random.hpp"
#include "core/engine/tensor.hpp"

namespace xg::nn::init {

/// Fills t with U(low, high) samples; throws xg::Error when low > high.
Tensor uniform_(Tensor t, double low = 0.0, double high = 1.0, Generator& gen = default_generator());
/// Fills t with N(mean, std^2) samples; throws xg::Error when std < 0.
Tensor normal_(Tensor t, double mean = 0.0, double std = 1.0, Generator& gen = default_generator());
/// Fills t with `value`.
Tensor constant_(Tensor t, double value);
/// Fills t with 0.
Tensor zeros_(Tensor t);
/// Fills t with 1.
Tensor ones_(Tensor t);

/// (fan_in, fan_out) of a weight: dims 1 and 0 times the product of any trailing dims.
/// Needs at least 2 dims, like PyTorch.
std::pair<std::size_t, std::size_t> calculate_fan_in_and_fan_out(const Shape& shape);

/// The recommended gain for a nonlinearity: "linear"/"sigmoid" 1, "tanh" 5/3, "relu" sqrt(2),
/// "leaky_relu" sqrt(2 / (1 + a^2)).
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

/// U(-b, b) with b = gain * sqrt(3 / fan_in) and gain = sqrt(2 / (1 + a^2)) (leaky_relu, fan_in
/// mode). nn::Linear uses a = sqrt(5), which gives b = 1 / sqrt(fan_in).
Tensor kaiming_uniform_(Tensor t, double a = 0.0, Generator& gen = default_generator());
/// U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).
Tensor xavier_uniform_(Tensor t, double gain = 1.0, Generator& gen = default_generator());

}  // namespace xg::nn::init
