#include "core/engine/random.hpp"

#include <cmath>
#include <sstream>

#include <fmt/format.h>

namespace xg {

double Generator::normal() {
    // 1 - u keeps the log argument in (0, 1].
    const double u1 = 1.0 - uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

std::uint64_t Generator::randint(std::uint64_t n) {
    if (n == 0) fail("randint", "upper bound must be positive");
    // Rejection sampling avoids modulo bias.
    const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() - std::numeric_limits<std::uint64_t>::max() % n;
    std::uint64_t r;
    do {
        r = engine_();
    } while (r >= limit);
    return r % n;
}

std::string Generator::state() const {
    std::ostringstream out;
    out << engine_;
    return out.str();
}

void Generator::set_state(const std::string& state) {
    std::istringstream in(state);
    std::mt19937_64 e;
    in >> e;
    if (in.fail()) fail("Generator::set_state", "the saved generator state is corrupt");
    engine_ = e;
}

Generator& default_generator() {
    static Generator gen(0);
    return gen;
}

void manual_seed(std::uint64_t seed) { default_generator().seed(seed); }

Tensor randn(const Shape& shape, Generator& gen, bool requires_grad) { return randn(shape, gen, default_dtype(), requires_grad); }
Tensor randn(const Shape& shape, Generator& gen, Dtype dtype, bool requires_grad) {
    Array a = Array::from_shape(shape);
    for (double& v : a) v = gen.normal();
    return Tensor(std::move(a), dtype, requires_grad);
}
Tensor randn(const Shape& shape, bool requires_grad) { return randn(shape, default_generator(), requires_grad); }
Tensor randn(const Shape& shape, Dtype dtype, bool requires_grad) { return randn(shape, default_generator(), dtype, requires_grad); }

Tensor rand(const Shape& shape, bool requires_grad) { return uniform(shape, 0.0, 1.0, requires_grad); }
Tensor rand(const Shape& shape, Dtype dtype, bool requires_grad) { return uniform(shape, 0.0, 1.0, dtype, requires_grad); }

Tensor uniform(const Shape& shape, double low, double high, bool requires_grad) {
    return uniform(shape, low, high, default_dtype(), requires_grad);
}
Tensor uniform(const Shape& shape, double low, double high, Dtype dtype, bool requires_grad) {
    if (!(low <= high)) fail("uniform", fmt::format("low {} must not exceed high {}", low, high));
    if (!std::isfinite(low) || !std::isfinite(high)) fail("uniform", fmt::format("needs a finite range, got [{}, {})", low, high));
    Array a = Array::from_shape(shape);
    for (double& v : a) v = default_generator().uniform(low, high);
    if (dtype == Dtype::Float32 && low < high) {  // rounding may reach high itself: keep the interval half-open
        const double below = std::nextafter(static_cast<float>(high), static_cast<float>(low));
        for (double& v : a) {
            if (static_cast<float>(v) >= static_cast<float>(high)) v = below;
        }
    }
    return Tensor(std::move(a), dtype, requires_grad);
}

xt::xarray<std::int64_t> randint(std::int64_t high, const Shape& shape) {
    if (high <= 0) fail("randint", "upper bound must be positive, got " + std::to_string(high));
    xt::xarray<std::int64_t> a = xt::xarray<std::int64_t>::from_shape(shape);
    for (auto& v : a) v = static_cast<std::int64_t>(default_generator().randint(static_cast<std::uint64_t>(high)));
    return a;
}

}  // namespace xg
