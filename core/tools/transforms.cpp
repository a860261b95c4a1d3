#include "core/tools/transforms.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/ops/ops.hpp"

namespace xg {

namespace {

const GradOptions kCreateGraph{false, true, true};
const GradOptions kRetainUnused{true, false, true};

// A fresh leaf holding x's value in x's dtype: the transforms never touch the caller's graph or .grad.
Tensor fresh_leaf(const Tensor& x, const char* op) {
    if (!x.defined()) fail(op, "x must be a defined tensor");
    return Tensor(x.value(), x.dtype(), true);
}

// f at a fresh leaf, with recording on (the transforms differentiate it).
Tensor evaluate(const TensorFunction& f, const Tensor& leaf) {
    EnableGradGuard recording;
    return f(leaf);
}

void check_same_shape(const Tensor& t, const Shape& expected, const char* op, const char* what) {
    if (t.shape() != expected) {
        fail(op, fmt::format("{} has shape {} but needs {}", what, shape_str(t.shape()), shape_str(expected)));
    }
}

// The gradient, or zeros where the output does not depend on the input at all (in `dtype`, the
// dtype the gradient would have).
Tensor or_zeros(const Tensor& g, const Shape& shape, Dtype dtype) {
    return g.defined() ? Tensor(g.value(), g.dtype()) : zeros(shape, dtype);
}

Tensor one_hot(const Shape& shape, std::size_t flat) {
    Tensor e = zeros(shape);
    e.mutable_value().data()[flat] = 1.0;
    return e;
}

Shape concat(const Shape& a, const Shape& b) {
    Shape s = a;
    s.insert(s.end(), b.begin(), b.end());
    return s;
}

}  // namespace

std::pair<Tensor, Tensor> vjp(const TensorFunction& f, const Tensor& x, const Tensor& v) {
    const Tensor leaf = fresh_leaf(x, "vjp");
    const Tensor y = evaluate(f, leaf);
    check_same_shape(v, y.shape(), "vjp", "v");
    if (!y.requires_grad()) return {y.detach(), zeros(x.shape(), x.dtype())};
    return {y.detach(), or_zeros(grad({y}, {leaf}, {v}, kRetainUnused)[0], x.shape(), x.dtype())};
}

std::pair<Tensor, Tensor> jvp(const TensorFunction& f, const Tensor& x, const Tensor& u) {
    const Tensor leaf = fresh_leaf(x, "jvp");
    check_same_shape(u, x.shape(), "jvp", "u");
    const Tensor y = evaluate(f, leaf);
    if (!y.requires_grad()) return {y.detach(), zeros(y.shape(), y.dtype())};
    const Tensor w = zeros(y.shape(), y.dtype(), true);  // g(w) = J^T w is linear in w: its vjp with u is J u
    const Tensor g = grad({y}, {leaf}, {w}, kCreateGraph)[0];
    if (!g.defined() || !g.requires_grad()) return {y.detach(), zeros(y.shape(), y.dtype())};
    return {y.detach(), or_zeros(grad({g}, {w}, {u}, kRetainUnused)[0], y.shape(), y.dtype())};
}

Tensor jacobian(const TensorFunction& f, const Tensor& x) {
    const Tensor leaf = fresh_leaf(x, "jacobian");
    const Tensor y = evaluate(f, leaf);
    const Shape ys = y.shape(), xs = x.shape();
    Array J = xt::zeros<double>(concat(ys, xs));
    if (!y.requires_grad()) return Tensor(std::move(J), x.dtype());  // rows of gradients: x's dtype
    const std::size_t n = x.numel();
    for (std::size_t row = 0; row < y.numel(); ++row) {
        const Tensor g = grad({y}, {leaf}, {one_hot(ys, row)}, kRetainUnused)[0];
        if (g.defined()) std::copy(g.value().data(), g.value().data() + n, J.data() + row * n);
    }
    return Tensor(std::move(J), x.dtype());
}

Tensor hessian(const TensorFunction& f, const Tensor& x) {
    const Tensor leaf = fresh_leaf(x, "hessian");
    const Tensor y = evaluate(f, leaf);
    if (y.numel() != 1) fail("hessian", fmt::format("f must return one element, got shape {}", shape_str(y.shape())));
    const Shape xs = x.shape();
    const std::size_t n = x.numel();
    Array H = xt::zeros<double>(concat(xs, xs));
    if (!y.requires_grad()) return Tensor(std::move(H), x.dtype());
    const Tensor g = grad({y}, {leaf}, {}, kCreateGraph)[0];
    if (!g.defined() || !g.requires_grad()) return Tensor(std::move(H), x.dtype());  // f is at most linear in x
    for (std::size_t row = 0; row < n; ++row) {
        const Tensor h = grad({g}, {leaf}, {one_hot(xs, row)}, kRetainUnused)[0];
        if (h.defined()) std::copy(h.value().data(), h.value().data() + n, H.data() + row * n);
    }
    return Tensor(std::move(H), x.dtype());
}

std::pair<Tensor, Tensor> hvp(const TensorFunction& f, const Tensor& x, const Tensor& v) {
    const Tensor leaf = fresh_leaf(x, "hvp");
    check_same_shape(v, x.shape(), "hvp", "v");
    const Tensor y = evaluate(f, leaf);
    if (y.numel() != 1) fail("hvp", fmt::format("f must return one element, got shape {}", shape_str(y.shape())));
    if (!y.requires_grad()) return {y.detach(), zeros(x.shape(), x.dtype())};
    const Tensor g = grad({y}, {leaf}, {}, kCreateGraph)[0];
    if (!g.defined() || !g.requires_grad()) return {y.detach(), zeros(x.shape(), x.dtype())};
    return {y.detach(), or_zeros(grad({g}, {leaf}, {v}, kRetainUnused)[0], x.shape(), x.dtype())};
}

}  // namespace xg
