// Seeded random numbers. One process-wide generator (like torch's default generator) so a
// training script reproduces run to run after xg::manual_seed; its state can be saved in
// checkpoints. The normal sampler is our own Box-Muller, so values do not depend on the
// standard library's distribution implementations.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "core/engine/tensor.hpp"

namespace xg {

/// A seeded 64-bit Mersenne Twister with uniform and normal samplers.
class Generator {
public:
    /// A generator seeded with `seed` (same seed, same stream on every platform).
    explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
    /// Restarts the stream from seed `s`.
    void seed(std::uint64_t s) { engine_.seed(s); }
    /// Uniform in [0, 1) with 53 random bits.
    double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
    /// Uniform in [low, high).
    double uniform(double low, double high) { return low + (high - low) * uniform(); }
    /// Standard normal (Box-Muller, one value per two uniforms).
    double normal();
    /// Uniform integer in [0, n).
    std::uint64_t randint(std::uint64_t n);
    /// Serialises the full engine state (for checkpoints).
    std::string state() const;
    /// Restores a state() string; throws xg::Error if it is not one.
    void set_state(const std::string& state);

private:
    std::mt19937_64 engine_;
};

/// The default generator used by randn/rand/uniform, Dropout and weight initialisation.
Generator& default_generator();
/// Reseeds the default generator.
void manual_seed(std::uint64_t seed);

/// Standard normal samples of `shape` from the default generator (or `gen`).
Tensor randn(const Shape& shape, bool requires_grad = false);
/// Standard normal samples of `shape` drawn from `gen`.
Tensor randn(const Shape& shape, Generator& gen, bool requires_grad = false);
/// Uniform samples in [0, 1).
Tensor rand(const Shape& shape, bool requires_grad = false);
/// Uniform samples in [low, high); throws xg::Error unless low <= high, both finite (as
/// PyTorch's uniform_).
Tensor uniform(const Shape& shape, double low, double high, bool requires_grad = false);
/// randn() in `dtype`: the float64 samples rounded (so a float32 draw is the float64 draw's rounding).
Tensor randn(const Shape& shape, Dtype dtype, bool requires_grad = false);
/// randn(shape, gen) in `dtype`.
Tensor randn(const Shape& shape, Generator& gen, Dtype dtype, bool requires_grad = false);
/// rand() in `dtype`.
Tensor rand(const Shape& shape, Dtype dtype, bool requires_grad = false);
/// uniform() in `dtype`.
Tensor uniform(const Shape& shape, double low, double high, Dtype dtype, bool requires_grad = false);
/// Uniform integers in [0, high) as an index array.
xt::xarray<std::int64_t> randint(std::int64_t high, const Shape& shape);

}  // namespace xg
