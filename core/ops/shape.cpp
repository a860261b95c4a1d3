// Shape ops: they move elements around; each backward moves the gradient back.
#include <algorithm>
#include <memory>
#include <numeric>
#include <type_traits>

#include <fmt/format.h>

#include "core/ops/linear_map.hpp"
#include "core/ops/ops.hpp"
#include "core/fast/strided.hpp"

namespace xg {

namespace {

std::size_t product(const Shape& s) { return std::accumulate(s.begin(), s.end(), std::size_t{1}, std::multiplies<>()); }

template <class T>
xt::xarray<T> reshaped(xt::xarray<T> a, const Shape& shape) {
    a.reshape(shape);
    return a;
}

std::string longs_str(const std::vector<long>& v) {
    std::string s = "(";
    for (std::size_t i = 0; i < v.size(); ++i) s += fmt::format(i ? ", {}" : "{}", v[i]);
    return s + ")";
}

// The elements [start:end:step] of `axis` select from a row-major array of shape `in`, as
// blocks of `inner` contiguous elements (the axes after `axis`): plain copies, where xtensor's
// strided views cost a tenth of an LSTM's forward + backward.
struct AxisSlice {
    std::size_t outer = 1, extent, inner = 1, start, count, step;
    AxisSlice(const Shape& in, std::size_t axis, std::size_t start_, std::size_t end, std::size_t step_)
        : extent(in[axis]), start(start_), count(end > start_ ? (end - start_ + step_ - 1) / step_ : 0), step(step_) {
        for (std::size_t d = 0; d < axis; ++d) outer *= in[d];
        for (std::size_t d = axis + 1; d < in.size(); ++d) inner *= in[d];
    }
    /// f(offset in the input, offset in the slice) for every block.
    template <class F>
    void for_each_block(F&& f) const {
        for (std::size_t o = 0; o < outer; ++o) {
            for (std::size_t t = 0; t < count; ++t) f((o * extent + start + t * step) * inner, (o * count + t) * inner);
        }
    }
};

// A tensor's elements as stored, for the data-moving ops: a narrower tensor's own storage (no
// float64 mirror is made) for T its storage type, the float64 values for T = double.
template <class T>
const T* stored(const Tensor& t) {
    if constexpr (std::is_same_v<T, double>) return t.value().data();
    else return t.values<T>().data();
}

// Moving elements is the same for any element type: slice and cat copy T = float for float32
// results (bit for bit the float64 op's result rounded, since nothing is computed).
template <class T>
xt::xarray<T> sliced(const Tensor& a, const AxisSlice& sl, const Shape& out_shape) {
    xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
    const T* from_a = stored<T>(a);
    sl.for_each_block([&](std::size_t from, std::size_t to) { std::copy_n(from_a + from, sl.inner, out.data() + to); });
    return out;
}

// d slice(x)/dx: the gradient g goes back into the selected positions (added to what `dx` holds
// there), zero elsewhere. D is the sum's storage (the walk's float64 accumulator, or a new array
// of the input's dtype), T the gradient's.
template <class D, class T>
void add_sliced_gradient(D* dx, const T* g, const AxisSlice& sl) {
    sl.for_each_block([&](std::size_t from, std::size_t to) {
        const T* part = g + to;
        for (std::size_t k = 0; k < sl.inner; ++k) dx[from + k] = static_cast<D>(ArithmeticOf<D>(dx[from + k]) + ArithmeticOf<D>(part[k]));
    });
}

template <class T>
xt::xarray<T> concatenated(const std::vector<Tensor>& tensors, const Shape& out_shape, const std::vector<AxisSlice>& parts) {
    xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
    for (std::size_t k = 0; k < tensors.size(); ++k) {
        const T* from = stored<T>(tensors[k]);
        parts[k].for_each_block([&](std::size_t in_out, std::size_t in_part) {
            std::copy_n(from + in_part, parts[k].inner, out.data() + in_out);
        });
    }
    return out;
}

// a's elements in the axis order `perm` (out axis i is a's axis perm[i]), copied by a plain
// strided loop: constructing an Array from xt::transpose's view took ~10 % of a Pre-LN
// Transformer block's forward+backward (attention's head split and merge).
// T = float moves a float32 tensor's storage as it is (bit for bit the float64 op's result rounded).
template <class T>
xt::xarray<T> permuted(const xt::xarray<T>& a, const std::vector<std::size_t>& perm) {
    const Shape in(a.shape().begin(), a.shape().end());
    const Strides rm = row_major_strides(in);
    Shape out_shape(perm.size());
    Strides strides(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) {
        out_shape[i] = in[perm[i]];
        strides[i] = rm[perm[i]];
    }
    xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
    const T* pa = a.data();
    T* po = out.data();
    parallel_for_each_index(out_shape, strides, [pa, po](std::size_t flat, std::size_t offset) { po[flat] = pa[offset]; });
    return out;
}

}  // namespace

Tensor reshape(const Tensor& a, const std::vector<long>& shape) {
    const Shape in = a.shape();
    Shape out(shape.size());
    long infer = -1;
    std::size_t known = 1;
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] == -1) {
            if (infer >= 0) {
                fail("reshape", fmt::format("only one dimension can be -1, got {} for input of shape {}", longs_str(shape),
                                            shape_str(in)));
            }
            infer = static_cast<long>(i);
        } else if (shape[i] < 0) {
            fail("reshape", fmt::format("invalid dimension {} in {} for input of shape {}", shape[i], longs_str(shape),
                                        shape_str(in)));
        } else {
            out[i] = static_cast<std::size_t>(shape[i]);
            known *= out[i];
        }
    }
    const std::size_t n = product(in);
    if (infer >= 0) {
        if (known == 0 || n % known != 0) {
            fail("reshape", fmt::format("shape {} is invalid for input of shape {} ({} elements)", longs_str(shape), shape_str(in), n));
        }
        out[static_cast<std::size_t>(infer)] = n / known;
    }
    if (product(out) != n) {
        fail("reshape", fmt::format("shape {} is invalid for input of shape {} ({} elements)", longs_str(shape), shape_str(in), n));
    }
    // d reshape(x)/dx: reshape the gradient back
    return on_storage(a, [&](const auto& values) {
        return record("reshape", reshaped(values, out), {a}, [in](const BackwardContext& c) -> std::vector<Tensor> {
            return {reshape(c.grad, std::vector<long>(in.begin(), in.end()))};
        });
    });
}

Tensor permute(const Tensor& a, const Axes& order) {
    const std::size_t n = a.dim();
    if (order.size() != n) {
        fail("permute", fmt::format("got {} axes for a tensor of shape {}", order.size(), shape_str(a.shape())));
    }
    std::vector<std::size_t> perm(n), inverse(n);
    std::vector<bool> seen(n, false);
    for (std::size_t i = 0; i < n; ++i) {
        perm[i] = normalize_axis(order[i], n, "permute");
        if (seen[perm[i]]) {
            fail("permute", fmt::format("axis {} repeated in the permutation {} of a tensor of shape {}", order[i],
                                        longs_str(std::vector<long>(order.begin(), order.end())), shape_str(a.shape())));
        }
        seen[perm[i]] = true;
        inverse[perm[i]] = i;
    }
    // d permute(x)/dx: apply the inverse permutation to the gradient
    return on_storage(a, [&](const auto& values) {
        return record("permute", permuted(values, perm), {a}, [inverse](const BackwardContext& c) -> std::vector<Tensor> {
            return {permute(c.grad, Axes(inverse.begin(), inverse.end()))};
        });
    });
}

Tensor transpose(const Tensor& a, int axis0, int axis1) {
    const std::size_t n = a.dim();
    Axes order(n);
    std::iota(order.begin(), order.end(), 0);
    std::swap(order[normalize_axis(axis0, n, "transpose")], order[normalize_axis(axis1, n, "transpose")]);
    return permute(a, order);
}

Tensor unsqueeze(const Tensor& a, int axis) {
    const Shape in = a.shape();
    Shape out = in;
    const long n = static_cast<long>(in.size());
    if (axis < -n - 1 || axis > n) {  // said here: normalize_axis would describe the (n+1)-D result
        fail("unsqueeze", fmt::format("axis {} is out of range [{}, {}] for input of shape {}", axis, -n - 1, n,
                                      shape_str(in)));
    }
    const std::size_t ax = normalize_axis(axis, in.size() + 1, "unsqueeze");
    out.insert(out.begin() + static_cast<long>(ax), 1);
    return reshape(a, std::vector<long>(out.begin(), out.end()));
}

Tensor squeeze(const Tensor& a, int axis) {
    Shape out = a.shape();
    const std::size_t ax = normalize_axis(axis, out.size(), "squeeze");
    if (out[ax] != 1) fail("squeeze", fmt::format("axis {} has extent {} in shape {}, not 1", axis, out[ax], shape_str(a.shape())));
    out.erase(out.begin() + static_cast<long>(ax));
    return reshape(a, std::vector<long>(out.begin(), out.end()));
}

namespace {

// The gradient of a slice as an op of g: zeros of the input's shape `in`, g added at the sliced
// positions (add_sliced_gradient). It is linear in g, so its own backward is the slice itself.
Tensor slice_backward(const Tensor& g, const AxisSlice& sl, const Shape& in, std::size_t axis, std::int64_t first,
                      std::int64_t last, std::int64_t step) {
    return on_storage(g, [&](const auto& gs) {
        using T = typename std::decay_t<decltype(gs)>::value_type;
        xt::xarray<T> dx = xt::zeros<T>(in);
        add_sliced_gradient(dx.data(), gs.data(), sl);
        return record("slice_backward", std::move(dx), {g}, [axis, first, last, step](const BackwardContext& c) -> std::vector<Tensor> {
            return {slice(c.grad, static_cast<int>(axis), first, last, step)};
        });
    });
}

}  // namespace

Tensor slice(const Tensor& a, int axis, std::int64_t start, std::int64_t end, std::int64_t step) {
    const Shape in = a.shape();
    const std::size_t ax = normalize_axis(axis, in.size(), "slice");
    if (step <= 0) {
        fail("slice", fmt::format("range [{}:{}:{}] is invalid for axis {} of shape {}: the step must be positive", start, end,
                                  step, axis, shape_str(in)));
    }
    const auto extent = static_cast<std::int64_t>(in[ax]);
    const std::int64_t first = start < 0 ? start + extent : start, last = end < 0 ? end + extent : end;
    if (first < 0 || first > last || last > extent) {
        fail("slice", fmt::format("range [{}:{}:{}] is invalid for axis {} of shape {}", start, end, step, axis, shape_str(in)));
    }
    const AxisSlice sl(in, ax, static_cast<std::size_t>(first), static_cast<std::size_t>(last), static_cast<std::size_t>(step));
    Shape out_shape = in;
    out_shape[ax] = sl.count;
    // d slice(x)/dx = add_sliced_gradient: a first-order backward adds g into the input's gradient
    // in place (T slices of one tensor cost T slices, not T tensor-sized arrays: docs/performance.md);
    // create_graph records the same kernel as the op slice_backward.
    Backward in_graph = [sl, in, ax, first, last, step](const BackwardContext& c) -> std::vector<Tensor> {
        return {slice_backward(c.grad, sl, in, ax, first, last, step)};
    };
    return on_storage(a, [&](const auto& x) {
        using T = typename std::decay_t<decltype(x)>::value_type;
        return record("slice", sliced<T>(a, sl, out_shape), {a}, [sl](const GradContext& c) -> Grads {
            add_sliced_gradient(c.accumulated(0).data(), c.grad_values<T>().data(), sl);
            return {std::nullopt};
        }, {}, std::move(in_graph));
    });
}

Tensor narrow(const Tensor& a, int axis, std::int64_t start, std::int64_t length) {
    const Shape in = a.shape();
    const std::size_t ax = normalize_axis(axis, in.size(), "narrow");
    const auto extent = static_cast<std::int64_t>(in[ax]);
    if (start < -extent || start > extent) {
        fail("narrow", fmt::format("start {} is out of range for axis {} of extent {} (expected {} to {})", start, axis,
                                   extent, -extent, extent));
    }
    if (length < 0) fail("narrow", fmt::format("length must be non-negative, got {}", length));
    const std::int64_t first = start < 0 ? start + extent : start;
    if (first + length > extent) {
        fail("narrow", fmt::format("start {} + length {} exceeds extent {} of axis {} in shape {}", first, length, extent, axis, shape_str(in)));
    }
    return slice(a, axis, first, first + length, 1);
}

Tensor cat(const std::vector<Tensor>& tensors, int axis) {
    if (tensors.empty()) fail("cat", "needs at least one tensor");
    const Shape first = tensors[0].shape();
    if (first.empty()) fail("cat", "zero-dimensional tensors cannot be concatenated");
    const std::size_t ax = normalize_axis(axis, first.size(), "cat");
    Shape out_shape = first;
    out_shape[ax] = 0;
    std::vector<std::size_t> offsets;
    for (std::size_t k = 0; k < tensors.size(); ++k) {
        const Shape s = tensors[k].shape();
        bool ok = s.size() == first.size();
        for (std::size_t d = 0; ok && d < s.size(); ++d) ok = d == ax || s[d] == first[d];
        if (!ok) {
            fail("cat", fmt::format("tensor {} has shape {} but tensor 0 has shape {}; all axes but {} must match", k,
                                    shape_str(s), shape_str(first), axis));
        }
        offsets.push_back(out_shape[ax]);
        out_shape[ax] += s[ax];
    }
    std::vector<AxisSlice> parts;  // where each tensor goes in the output
    std::vector<Shape> shapes;
    for (std::size_t k = 0; k < tensors.size(); ++k) {
        shapes.push_back(tensors[k].shape());
        parts.emplace_back(out_shape, ax, offsets[k], offsets[k] + shapes[k][ax], 1);
    }
    // d cat(x_k)/dx_k: the slice of the gradient that x_k filled
    Backward backward = [ax, offsets, shapes](const BackwardContext& c) -> std::vector<Tensor> {
        std::vector<Tensor> g(shapes.size());
        for (std::size_t k = 0; k < shapes.size(); ++k) {
            if (!c.needs_grad(k)) continue;
            const auto first = static_cast<std::int64_t>(offsets[k]);
            g[k] = slice(c.grad, static_cast<int>(ax), first, first + static_cast<std::int64_t>(shapes[k][ax]), 1);
        }
        return g;
    };
    // tensors of one dtype: the result copied from their own storage; mixed dtypes: from float64 values
    const Dtype dtype = tensors.front().dtype();
    const bool one_dtype = std::all_of(tensors.begin(), tensors.end(), [dtype](const Tensor& t) { return t.dtype() == dtype; });
    return with_storage_type(one_dtype ? dtype : Dtype::Float64, [&](auto storage) {
        return record("cat", concatenated<typename decltype(storage)::type>(tensors, out_shape, parts), tensors, std::move(backward));
    });
}

Tensor stack(const std::vector<Tensor>& tensors, int axis) {
    if (tensors.empty()) fail("stack", "needs at least one tensor");
    const Shape first = tensors[0].shape();
    normalize_axis(axis, first.size() + 1, "stack");  // checked here so the error blames stack, not unsqueeze
    std::vector<Tensor> expanded;
    for (std::size_t k = 0; k < tensors.size(); ++k) {
        if (tensors[k].shape() != first) {
            fail("stack", fmt::format("tensor {} has shape {} but tensor 0 has shape {}; stack needs equal shapes", k,
                                      shape_str(tensors[k].shape()), shape_str(first)));
        }
        expanded.push_back(unsqueeze(tensors[k], axis));
    }
    return cat(expanded, axis);
}

Tensor gather(const Tensor& a, int axis, const Indices& index_arg) {
    const IndexArray index = index_arg.get("gather");
    const Shape in = a.shape();
    const Shape is(index.shape().begin(), index.shape().end());
    const std::size_t ax = normalize_axis(axis, in.size(), "gather");
    bool ok = is.size() == in.size();
    for (std::size_t d = 0; ok && d < is.size(); ++d) ok = d == ax || is[d] <= in[d];
    if (!ok) {
        fail("gather", fmt::format("index of shape {} does not fit input of shape {} (same rank, and no larger on axes other than {})",
                                   shape_str(is), shape_str(in), axis));
    }
    Strides st = row_major_strides(in);
    const std::size_t axis_stride = st[ax];
    st[ax] = 0;
    // offsets[i] = where out[i] reads from in a's flat storage
    std::vector<std::size_t> offsets(index.size());
    const std::int64_t* pi = index.data();
    for_each_index(is, st, [&](std::size_t i, std::size_t base) {
        if (pi[i] < 0 || pi[i] >= static_cast<std::int64_t>(in[ax])) {
            fail("gather", fmt::format("index {} is out of range for axis {} of extent {} (input shape {})", pi[i], axis, in[ax], shape_str(in)));
        }
        offsets[i] = base + static_cast<std::size_t>(pi[i]) * axis_stride;
    });
    // d gather/dx: scatter-add the gradient back to the positions read (repeats accumulate)
    auto map = std::make_shared<const FlatGather>(FlatGather{"gather", in, is, std::move(offsets)});
    return on_storage(a, [&](const auto& values) {
        auto out = std::decay_t<decltype(values)>::from_shape(is);
        for (std::size_t i = 0; i < map->offsets.size(); ++i) out.data()[i] = values.data()[map->offsets[i]];
        return record("gather", std::move(out), {a}, [map](const BackwardContext& c) -> std::vector<Tensor> {
            return {scatter_in_graph(c.grad, map)};
        }, {{"index", is}});
    });
}

Tensor masked_fill(const Tensor& a, const Mask& mask, double value) {
    const Shape in = a.shape();
    const Shape ms(mask.shape().begin(), mask.shape().end());
    if (broadcast_shapes(ms, in, "masked_fill") != in) {
        fail("masked_fill", fmt::format("mask of shape {} does not broadcast to the input's shape {}", shape_str(ms), shape_str(in)));
    }
    const Strides sm = broadcast_strides(ms, in);
    std::vector<char> hit(a.numel());
    const bool* pm = mask.data();
    for_each_index(in, sm, [&](std::size_t i, std::size_t im) { hit[i] = pm[im]; });
    // d masked_fill/dx = 1 where the mask is false, 0 where it filled: the gradient filled with 0
    // where the mask is true (a masked_fill again, so it differentiates to any order)
    auto filled_at = std::make_shared<const std::vector<char>>(std::move(hit));
    return on_storage(a, [&](const auto& values) {
        using T = typename std::decay_t<decltype(values)>::value_type;
        auto out = values;  // `value` rounded once into the storage, as record() rounds
        const auto fill = static_cast<T>(value);
        for (std::size_t i = 0; i < filled_at->size(); ++i) {
            if ((*filled_at)[i]) out.data()[i] = fill;
        }
        return record("masked_fill", std::move(out), {a}, [filled_at, in](const BackwardContext& c) -> std::vector<Tensor> {
            Mask filled = Mask::from_shape(in);
            std::copy(filled_at->begin(), filled_at->end(), filled.data());
            return {masked_fill(c.grad, filled, 0.0)};
        }, {{"mask", ms}});
    });
}

}  // namespace xg
