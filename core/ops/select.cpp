// Selection: where, index_select, argmax/argmin, and the checked conversion of doubles into
// indices (xg::Indices). Forward and backward side by side.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/ops/axis_view.hpp"
#include "core/ops/linear_map.hpp"
#include "core/ops/ops.hpp"
#include "core/fast/strided.hpp"

namespace xg {

namespace {

// 2^63 is the first double past the int64 range; every double below it in magnitude is exact.
constexpr double kInt64Limit = 9223372036854775808.0;

IndexArray checked_indices(const Array& values, const std::string& op) {
    IndexArray out = IndexArray::from_shape(values.shape());
    const double* v = values.data();
    for (std::size_t i = 0; i < values.size(); ++i) {
        if (!(std::isfinite(v[i]) && v[i] == std::floor(v[i]) && v[i] >= -kInt64Limit && v[i] < kInt64Limit)) {
            fail(op, fmt::format("index array of shape {} holds {} at flat position {}, which is not a whole number "
                                 "in the int64 range; indices are never rounded or truncated",
                                 shape_str(shape_of(values)), v[i], i));
        }
        out.data()[i] = static_cast<std::int64_t>(v[i]);
    }
    return out;
}

// Whether `candidate` replaces `best` as the extreme value: strictly beyond it (so the first of
// equal values stays), and a NaN wins over every number and stays (torch.argmax / argmin).
bool replaces(double candidate, double best, bool largest) {
    if (std::isnan(best)) return false;
    if (std::isnan(candidate)) return true;
    return largest ? candidate > best : candidate < best;
}

IndexArray arg_extreme_flat(const Tensor& a, bool largest, const char* op) {
    if (a.numel() == 0) fail(op, fmt::format("cannot take the {} of an empty tensor of shape {}", op, shape_str(a.shape())));
    const std::size_t best = on_storage(a, [&](const auto& v) {
        std::size_t first = 0;
        for (std::size_t i = 1; i < v.size(); ++i) {
            if (replaces(v.data()[i], v.data()[first], largest)) first = i;
        }
        return first;
    });
    IndexArray out = IndexArray::from_shape({});
    out() = static_cast<std::int64_t>(best);
    return out;
}

IndexArray arg_extreme(const Tensor& a, int axis, bool keepdim, bool largest, const char* op) {
    const Shape in = a.shape();
    if (in.empty()) {  // a 0-D tensor has one element, at index 0, for axis 0 or -1 (as PyTorch)
        normalize_axis(axis, 1, op);
        return arg_extreme_flat(a, largest, op);
    }
    const std::size_t ax = normalize_axis(axis, in.size(), op);
    if (in[ax] == 0) fail(op, fmt::format("cannot reduce the empty axis {} of shape {}", axis, shape_str(in)));
    const AxisView view = axis_view(in, ax);
    Shape out_shape = in;
    if (keepdim) {
        out_shape[ax] = 1;
    } else {
        out_shape.erase(out_shape.begin() + static_cast<long>(ax));
    }
    IndexArray out = IndexArray::from_shape(out_shape);
    on_storage(a, [&](const auto& values) {
        const auto* x = values.data();
        for (std::size_t o = 0; o < view.outer; ++o) {
            for (std::size_t i = 0; i < view.inner; ++i) {
                const auto* row = x + o * view.len * view.inner + i;
                std::size_t best = 0;
                for (std::size_t j = 1; j < view.len; ++j) {
                    if (replaces(row[j * view.inner], row[best * view.inner], largest)) best = j;
                }
                out.data()[o * view.inner + i] = static_cast<std::int64_t>(best);
            }
        }
    });
    return out;
}

// The rows `rows` of axis `view` of x, copied as stored (T = float for a float32 tensor).
template <class T>
xt::xarray<T> selected_rows(const T* x, const AxisView& view, const std::vector<std::size_t>& rows, const Shape& out_shape) {
    xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
    for (std::size_t o = 0; o < view.outer; ++o) {
        for (std::size_t k = 0; k < rows.size(); ++k) {
            const T* src = x + (o * view.len + rows[k]) * view.inner;
            std::copy(src, src + view.inner, out.data() + (o * rows.size() + k) * view.inner);
        }
    }
    return out;
}

}  // namespace

// ---- indices from doubles ---------------------------------------------------------------------

Indices::Indices(const Indices& other)
    : owned_(other.owned_), indices_(other.owned_ ? &*owned_ : other.indices_), values_(other.values_) {}

IndexArray Indices::get(const std::string& op) const {
    if (indices_) return *indices_;
    return checked_indices(*values_, op);
}

IndexArray to_indices(const Tensor& values) { return checked_indices(values.value(), "to_indices"); }
IndexArray to_indices(const Array& values) { return checked_indices(values, "to_indices"); }

// ---- where ----------------------------------------------------------------------------------

Tensor where(const Mask& cond, const Tensor& a, const Tensor& b) {
    const Shape sc(cond.shape().begin(), cond.shape().end()), sa = a.shape(), sb = b.shape();
    const Shape out_shape = broadcast_shapes(broadcast_shapes(sc, sa, "where"), sb, "where");
    // Which output elements take a; kept for backward (the mask may be a temporary).
    std::size_t count = 1;
    for (std::size_t d : out_shape) count *= d;
    std::vector<char> take_a(count);
    const bool* pc = cond.data();
    for_each_index(out_shape, broadcast_strides(sc, out_shape), [&](std::size_t i, std::size_t ic) { take_a[i] = pc[ic]; });
    // d where/da = 1 where cond, d where/db = 1 where !cond; each summed over its broadcast axes
    Backward backward = [take_a, out_shape](const BackwardContext& c) -> std::vector<Tensor> {
        std::vector<Tensor> g(2);
        for (std::size_t k = 0; k < 2; ++k) {
            if (!c.needs_grad(k)) continue;
            Mask other = Mask::from_shape(out_shape);  // the elements the other input gave
            for (std::size_t i = 0; i < take_a.size(); ++i) other.data()[i] = (take_a[i] != 0) != (k == 0);
            g[k] = sum_to(masked_fill(c.grad, other, 0.0), c.input_shape(k));
        }
        return g;
    };
    return on_storage(a, b, [&](const auto& va, const auto& vb) {
        auto out = empty_storage<typename std::decay_t<decltype(va)>::value_type>(out_shape);
        const auto *pa = va.data(), *pb = vb.data();
        parallel_for_each_index2(out_shape, broadcast_strides(sa, out_shape), broadcast_strides(sb, out_shape),
                                 [&](std::size_t i, std::size_t ia, std::size_t ib) { out.data()[i] = take_a[i] ? pa[ia] : pb[ib]; });
        return record("where", std::move(out), {a, b}, std::move(backward), {{"cond", sc}});
    });
}

// ---- index_select ---------------------------------------------------------------------------

Tensor index_select(const Tensor& a, int axis, const Indices& index_arg) {
    const IndexArray index = index_arg.get("index_select");
    const Shape in = a.shape();
    const Shape is(index.shape().begin(), index.shape().end());
    if (in.empty()) fail("index_select", "cannot select from a 0-D tensor");
    const std::size_t ax = normalize_axis(axis, in.size(), "index_select");
    if (is.size() != 1) {
        fail("index_select", fmt::format("index must be 1-D, got shape {} (input {})", shape_str(is), shape_str(in)));
    }
    const AxisView view = axis_view(in, ax);
    std::vector<std::size_t> rows(index.size());
    for (std::size_t k = 0; k < index.size(); ++k) {
        if (index(k) < 0 || index(k) >= static_cast<std::int64_t>(view.len)) {
            fail("index_select", fmt::format("index {} at position {} is out of range for axis {} of extent {} (input {})",
                                             index(k), k, axis, view.len, shape_str(in)));
        }
        rows[k] = static_cast<std::size_t>(index(k));
    }
    Shape out_shape = in;
    out_shape[ax] = rows.size();
    // d out[.., k, ..] / d a[.., index[k], ..] = 1: add each selected slice's gradient back (repeats accumulate)
    Backward backward = [in, view, rows, out_shape](const BackwardContext& c) -> std::vector<Tensor> {
        auto m = std::make_shared<FlatGather>(FlatGather{"index_select", in, out_shape, {}});
        m->offsets.reserve(view.outer * rows.size() * view.inner);
        for (std::size_t o = 0; o < view.outer; ++o) {
            for (std::size_t row : rows) {
                for (std::size_t i = 0; i < view.inner; ++i) m->offsets.push_back((o * view.len + row) * view.inner + i);
            }
        }
        return {scatter_in_graph(c.grad, std::move(m))};
    };
    return on_storage(a, [&](const auto& values) {  // rows copied as stored
        return record("index_select", selected_rows(values.data(), view, rows, out_shape), {a}, std::move(backward), {{"index", is}});
    });
}

// ---- argmax / argmin --------------------------------------------------------------------------

IndexArray argmax(const Tensor& a) { return arg_extreme_flat(a, true, "argmax"); }
IndexArray argmax(const Tensor& a, int axis, bool keepdim) { return arg_extreme(a, axis, keepdim, true, "argmax"); }
IndexArray argmin(const Tensor& a) { return arg_extreme_flat(a, false, "argmin"); }
IndexArray argmin(const Tensor& a, int axis, bool keepdim) { return arg_extreme(a, axis, keepdim, false, "argmin"); }

}  // namespace xg
