// Tutorial 15: LayerNorm's Jacobian and curvature. LayerNorm of a row of H features has a
// symmetric Jacobian (without an affine weight) that kills the ones vector and, at eps = 0, the
// normalised row xhat: rank H - 2, which is its invariance to shifting and scaling the input.
// RMSNorm's kills only x (rank H - 1). eps turns the xhat direction back on, by rstd eps/(var + eps).
// Second derivatives come from backward with create_graph: Hessian-vector products through the
// fused kernel agree with the composed twin and with finite differences, Newton's method takes
// them on a scalar, and a gradient penalty differentiates a gradient.
// Guide: docs/tutorials/15-layernorm-curvature.md. Run with --step to pause after each step.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/ops/ops.hpp"
#include "core/tools/transforms.hpp"
#include "nn/functional/functional.hpp"
#include "tutorials/15_layernorm_curvature/layernorm_curvature.hpp"
#include "tutorials/common/tutorial.hpp"

using namespace xg::tutorial;
namespace tv = tutorial_values;

int main(int argc, char** argv) {
    Tutorial tut(argc, argv,
                 {"15 LayerNorm's Jacobian and curvature", "(supports A1.4, A3.2: the backward and eps)",
                  "docs/tutorials/15-layernorm-curvature.md", "under 1 s", "", ""});

    tut.section("15.1", "the Jacobian of LayerNorm at x = [1, 2, 4, 7], eps = 0, no affine");
    const tv::LayerNormJacobian j0 = tv::curvature_layer_norm_jacobian(0.0);
    tut.step("xhat = LN(x)", vec(j0.xhat, 5));
    tut.step("J = d LN(x) / dx by xg::jacobian (one backward per output row)");
    tut.show(matrix(j0.jacobian, 5));
    tut.say("closed form rstd (I - 1 1^T / H - xhat xhat^T / H), rstd = " + num(j0.rstd, 5) +
            ": max difference " + under(j0.closed_form_err, 1e-15));
    tut.conclude("J is symmetric: LN(x) is the gradient of sqrt(H (|x - mean|^2 + H eps))");

    tut.section("15.2", "its null space: the ones vector and xhat, so rank H - 2");
    tut.step("|J 1| " + under(j0.ones_residual, 1e-14) + ", |J xhat| " + under(j0.xhat_residual, 1e-14) +
             ", |LN(3 x) - LN(x)| " + under(j0.scale_residual, 1e-14));
    tut.step("eigenvalues of J", vec(j0.eigenvalues, 5));
    tut.say(fmt::format("rank {} of H = {}: two zeros (shift and scale of x change nothing), and rstd twice",
                        j0.rank, j0.eigenvalues.size()));
    const tv::RmsNormJacobian r0 = tv::curvature_rms_norm_jacobian(0.0);
    tut.step("RMSNorm at eps = 0: eigenvalues", vec(r0.eigenvalues, 5));
    tut.say(fmt::format("rank {}: only the scale direction x is lost (|J x| {}); a shift changes its output",
                        r0.rank, under(r0.x_residual, 1e-14)));
    tut.conclude("the backward sends no gradient along 1 or xhat: gx = J^T g is orthogonal to both");

    tut.section("15.3", "eps turns the xhat direction back on");
    std::vector<std::vector<std::string>> rows{{"eps", "var", "eigenvalue along xhat", "rstd eps / (var + eps)"}};
    for (const tv::EpsRow& r : tv::curvature_eps_rows()) {
        rows.push_back({sci(r.eps, 0), r.var == 0.0 ? "0" : sci(r.var, 2), sci(r.along_xhat, 4), sci(r.predicted, 4)});
    }
    tut.step("x = [1, 2, 4, 7] scaled so that var takes the values below, eps = 1e-5 (PyTorch's default)");
    tut.show(table(rows));
    const tv::LayerNormJacobian j5 = tv::curvature_layer_norm_jacobian(1e-5);
    tut.say(fmt::format("at eps = 1e-5 on the first x the rank is {}: the xhat eigenvalue is tiny but not 0", j5.rank));
    tut.conclude("eps matters once var is near it: the xhat eigenvalue grows from ~0 to 1/sqrt(eps), and");
    tut.say("   a constant row (var 0) has J = (I - 1 1^T / H) / sqrt(eps): finite, as A3.2 says eps ensures");

    tut.section("15.4", "Hessian-vector products through the fused kernel (create_graph)");
    const tv::HvpCheck h = tv::curvature_hvp();
    tut.step("L(x) = sum(c * tanh(LN(x) w + b)), one row of H = 6, eps = 1e-5");
    tut.say("H v by xg::hvp = " + vec(h.hv, 4));
    tut.say("fused layer_norm vs layer_norm_composed: max difference " + under(h.twin_diff, 1e-15));
    tut.say("central differences of the gradient (h = 1e-5): max error " + under(h.fd_err, 1e-9));
    tut.say("symmetry |u^T H v - v^T H u| " + under(h.symmetry, 1e-15));
    tut.conclude("the fused kernel's double backward recomputes through the composed twin: exact, not approximate");

    tut.section("15.5", "Newton's method and a gradient penalty");
    const std::vector<double> xs = tv::curvature_newton(6);
    std::string path;
    for (double x : xs) path += (path.empty() ? "" : " -> ") + num(x, 8);
    tut.step("f(x) = x^4 - 2 x^2 from x = 2, x <- x - f'(x) / f''(x)");
    tut.say(path);
    tut.say("the error squares at each step near the minimum x = 1: quadratic convergence");
    const tv::PenaltyCheck p = tv::curvature_gradient_penalty();
    tut.step("gradient penalty P(w) = |dL/dx|^2 for L = sum(c * LN(x) w)", num(p.penalty, 6));
    tut.say("dP/dw = " + vec(p.grad_w, 5) + ", central differences agree " + under(p.fd_err, 1e-7));
    tut.conclude("a gradient can be part of a loss (as in WGAN-GP): backward builds a differentiable graph");
    return 0;
}

namespace tutorial_values {

using namespace xg;
namespace F = xg::nn::functional;

namespace {

double norm(const Array& a) {
    double s = 0;
    for (double v : a) s += v * v;
    return std::sqrt(s);
}

Array matvec(const Array& m, const Array& v) {
    const std::size_t n = m.shape()[0], k = m.shape()[1];
    Array out = xt::zeros<double>({n});
    for (std::size_t i = 0; i < n; ++i) {
        for (std::size_t j = 0; j < k; ++j) out(i) += m(i, j) * v(j);
    }
    return out;
}

const Array kRow = {1.0, 2.0, 4.0, 7.0};

int count_above(const std::vector<double>& values, double threshold) {
    return static_cast<int>(std::count_if(values.begin(), values.end(), [threshold](double v) { return std::fabs(v) > threshold; }));
}

}  // namespace

std::vector<double> symmetric_eigenvalues(const Array& a) {
    Array m = a;
    const std::size_t n = m.shape()[0];
    for (int sweep = 0; sweep < 50; ++sweep) {
        double off = 0;
        for (std::size_t p = 0; p < n; ++p) {
            for (std::size_t q = p + 1; q < n; ++q) off += m(p, q) * m(p, q);
        }
        if (off < 1e-30) break;
        for (std::size_t p = 0; p < n; ++p) {
            for (std::size_t q = p + 1; q < n; ++q) {
                if (m(p, q) == 0.0) continue;
                // the rotation that zeroes m(p, q)
                const double theta = (m(q, q) - m(p, p)) / (2 * m(p, q));
                const double t = (theta >= 0 ? 1.0 : -1.0) / (std::fabs(theta) + std::sqrt(theta * theta + 1));
                const double c = 1 / std::sqrt(t * t + 1), s = t * c;
                for (std::size_t k = 0; k < n; ++k) {
                    const double mkp = m(k, p), mkq = m(k, q);
                    m(k, p) = c * mkp - s * mkq;
                    m(k, q) = s * mkp + c * mkq;
                }
                for (std::size_t k = 0; k < n; ++k) {
                    const double mpk = m(p, k), mqk = m(q, k);
                    m(p, k) = c * mpk - s * mqk;
                    m(q, k) = s * mpk + c * mqk;
                }
            }
        }
    }
    std::vector<double> values(n);
    for (std::size_t i = 0; i < n; ++i) values[i] = m(i, i);
    std::sort(values.begin(), values.end());
    return values;
}

LayerNormJacobian curvature_layer_norm_jacobian(double eps) {
    LayerNormJacobian r;
    r.x = kRow;
    const auto ln = [eps](const Tensor& t) { return F::layer_norm(t, {4}, Tensor(), Tensor(), eps); };
    r.xhat = ln(Tensor(r.x)).value();
    r.jacobian = jacobian(ln, Tensor(r.x)).value();
    const std::size_t H = r.x.size();
    double mean = 0, var = 0;
    for (double v : r.x) mean += v / static_cast<double>(H);
    for (double v : r.x) var += (v - mean) * (v - mean) / static_cast<double>(H);
    r.rstd = 1 / std::sqrt(var + eps);
    for (std::size_t i = 0; i < H; ++i) {
        for (std::size_t j = 0; j < H; ++j) {
            const double closed = r.rstd * ((i == j ? 1.0 : 0.0) - 1.0 / static_cast<double>(H) -
                                            r.xhat(i) * r.xhat(j) / static_cast<double>(H));
            r.closed_form_err = std::max(r.closed_form_err, std::fabs(r.jacobian(i, j) - closed));
        }
    }
    r.ones_residual = norm(matvec(r.jacobian, xt::ones<double>({H})));
    r.xhat_residual = norm(matvec(r.jacobian, r.xhat));
    r.scale_residual = norm(Array(ln(Tensor(Array(r.x * 3.0))).value() - r.xhat));
    r.eigenvalues = symmetric_eigenvalues(r.jacobian);
    r.rank = count_above(r.eigenvalues, 1e-12 * r.rstd);
    return r;
}

RmsNormJacobian curvature_rms_norm_jacobian(double eps) {
    RmsNormJacobian r;
    const auto rms = [eps](const Tensor& t) { return F::rms_norm(t, {4}, Tensor(), eps); };
    r.jacobian = jacobian(rms, Tensor(kRow)).value();
    r.eigenvalues = symmetric_eigenvalues(r.jacobian);
    r.x_residual = norm(matvec(r.jacobian, kRow));
    r.rank = count_above(r.eigenvalues, 1e-12 * r.eigenvalues.back());
    return r;
}

std::vector<EpsRow> curvature_eps_rows() {
    std::vector<EpsRow> rows;
    const double eps = 1e-5, base_var = 5.25;  // var of [1, 2, 4, 7]
    for (double var : {5.25, 1e-2, 1e-4, 1e-5, 1e-6, 0.0}) {
        const Array x = kRow * std::sqrt(var / base_var);
        const auto ln = [eps](const Tensor& t) { return F::layer_norm(t, {4}, Tensor(), Tensor(), eps); };
        const Array J = jacobian(ln, Tensor(x)).value();
        const double mean = xt::mean(x)(), rstd = 1 / std::sqrt(var + eps);
        Array d = x - mean;  // the xhat direction (any length); at var 0 take that of [1, 2, 4, 7]
        if (var == 0.0) d = kRow - xt::mean(kRow)();
        const Array Jd = matvec(J, d);
        double along = 0, dd = 0;
        for (std::size_t i = 0; i < d.size(); ++i) along += d(i) * Jd(i), dd += d(i) * d(i);
        rows.push_back({eps, var, along / dd, rstd * eps / (var + eps)});
    }
    return rows;
}

HvpCheck curvature_hvp() {
    HvpCheck r;
    const Tensor x(Array{{0.3, -1.2, 2.0, 0.7, -0.4, 1.1}});
    const Tensor w(Array{1.2, 0.8, -0.5, 1.0, 0.6, 1.4}), b(Array{0.1, -0.2, 0.3, 0.0, 0.2, -0.1});
    const Tensor c(Array{{1.0, -2.0, 0.5, 1.5, -1.0, 0.7}});
    const Array v = {{0.5, 1.0, -0.3, 0.2, -0.8, 0.4}}, u = {{-0.2, 0.6, 0.9, -1.0, 0.3, 0.5}};
    const auto loss = [&](bool fused) {
        return [&, fused](const Tensor& t) {
            const Tensor y = fused ? F::layer_norm(t, {6}, w, b, 1e-5) : F::layer_norm_composed(t, {6}, w, b, 1e-5);
            return sum(c * tanh(y));
        };
    };
    r.hv = hvp(loss(true), x, Tensor(v)).second.value();
    const Array hv_twin = hvp(loss(false), x, Tensor(v)).second.value();
    r.twin_diff = xt::amax(xt::abs(r.hv - hv_twin))();
    const auto gradient = [&](const Array& at) {
        Tensor t(at, true);
        return grad({loss(true)(t)}, {t})[0].value();
    };
    const double h = 1e-5;
    const Array fd = (gradient(x.value() + h * v) - gradient(x.value() - h * v)) / (2 * h);
    r.fd_err = xt::amax(xt::abs(r.hv - fd))();
    const Array hu = hvp(loss(true), x, Tensor(u)).second.value();
    r.symmetry = std::fabs(xt::sum(u * r.hv)() - xt::sum(v * hu)());
    return r;
}

std::vector<double> curvature_newton(int iterations) {
    std::vector<double> xs{2.0};
    for (int i = 0; i < iterations; ++i) {
        Tensor x(Array(xs.back()), true);
        const Tensor y = pow(x, 4.0) - 2.0 * pow(x, 2.0);
        const Tensor gx = grad({y}, {x}, {}, {false, true, false})[0];  // f'(x), itself differentiable
        const Tensor gxx = grad({gx}, {x})[0];                           // f''(x)
        xs.push_back(xs.back() - gx.value()() / gxx.value()());
    }
    return xs;
}

PenaltyCheck curvature_gradient_penalty() {
    PenaltyCheck r;
    const Array x = {{0.5, -1.0, 2.0, 0.3}, {1.5, 0.2, -0.7, 0.9}, {-0.4, 1.1, 0.6, -1.3}};
    const Array c = {{1.0, -0.5, 0.8, 0.2}, {-1.2, 0.4, 0.3, 1.0}, {0.6, 0.9, -0.8, -0.3}};
    const auto penalty = [&](const Tensor& w) {
        Tensor x_leaf(x, true);
        const Tensor L = sum(Tensor(c) * F::layer_norm(x_leaf, {4}, w, Tensor(), 1e-5));
        const Tensor gx = grad({L}, {x_leaf}, {}, {false, true, false})[0];
        return sum(gx * gx);
    };
    Tensor w(Array{1.0, 0.8, 1.3, 0.6}, true);
    const Tensor P = penalty(w);
    r.penalty = P.value()();
    r.grad_w = grad({P}, {w})[0].value();
    const double h = 1e-6;
    for (std::size_t k = 0; k < 4; ++k) {
        Array up = w.value(), down = w.value();
        up(k) += h, down(k) -= h;
        const double fd = (penalty(Tensor(up)).value()() - penalty(Tensor(down)).value()()) / (2 * h);
        r.fd_err = std::max(r.fd_err, std::fabs(fd - r.grad_w(k)));
    }
    return r;
}

}  // namespace tutorial_values
