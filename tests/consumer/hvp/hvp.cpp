// Hessian-vector products of a loss through layer_norm, from a program built against the
// installed package: xg::grad with create_graph through the fused op, and through its composed
// twin, must agree to 1e-10; and xg::hvp, declared by <xgrad/xgrad.hpp> alone, must give 6 x v
// for sum(x^3). Exits 1 (and says why) if not.
#include <cmath>
#include <cstdio>

#include <xgrad/xgrad.hpp>

namespace F = xg::nn::functional;

namespace {

// H v for L(x, w, b) = sum(c * tanh(layer_norm(x))) along v = (v_x, v_w, v_b), for every input.
std::vector<xg::Array> hvp(bool fused) {
    xg::Generator gen(15);
    xg::Tensor x = xg::randn({3, 6}, gen, true), w = xg::randn({6}, gen, true), b = xg::randn({6}, gen, true);
    const xg::Tensor c = xg::randn({3, 6}, gen);
    const xg::Tensor y = fused ? F::layer_norm(x, {6}, w, b, 1e-5) : F::layer_norm_composed(x, {6}, w, b, 1e-5);
    const xg::Tensor loss = xg::sum(c * xg::tanh(y));
    const std::vector<xg::Tensor> g = xg::grad({loss}, {x, w, b}, {}, {false, true, false});
    xg::Tensor inner = xg::scalar(0.0);
    for (const xg::Tensor& gi : g) inner = inner + xg::sum(gi * xg::randn(gi.shape(), gen));
    std::vector<xg::Array> out;
    for (const xg::Tensor& h : xg::grad({inner}, {x, w, b})) out.push_back(h.value());
    return out;
}

}  // namespace

int main() {
    const std::vector<xg::Array> fused = hvp(true), composed = hvp(false);
    double worst = 0.0, scale = 0.0;
    for (std::size_t i = 0; i < fused.size(); ++i) {
        for (std::size_t k = 0; k < fused[i].size(); ++k) {
            worst = std::max(worst, std::fabs(fused[i].data()[k] - composed[i].data()[k]));
            scale = std::max(scale, std::fabs(composed[i].data()[k]));
        }
    }
    std::printf("layer_norm Hessian-vector product, fused vs composed: max |diff| %.1e (largest entry %.3f)\n", worst, scale);
    if (!(worst <= 1e-10) || scale == 0.0) {
        std::printf("FAILED: expected agreement to 1e-10 and a nonzero product\n");
        return 1;
    }
    // xg::hvp (core/tools/transforms.hpp) through the umbrella header alone: H v of sum(x^3) is 6 x v.
    const xg::Tensor x({1.0, -2.0, 0.5}), v({0.5, 1.0, -3.0});
    const xg::Tensor hv = xg::hvp([](const xg::Tensor& t) { return xg::sum(t * t * t); }, x, v).second;
    for (std::size_t k = 0; k < 3; ++k) {
        if (std::fabs(hv(k) - 6.0 * x(k) * v(k)) > 1e-12) {
            std::printf("FAILED: xg::hvp gave %.17g at %zu, expected %.17g\n", hv(k), k, 6.0 * x(k) * v(k));
            return 1;
        }
    }
    std::printf("hvp ok\n");
    return 0;
}
