// Internal: plain strided loops over row-major shapes, used for broadcasting and axis
// reductions without building lazy xtensor broadcast expressions (3-5x slower here).
#pragma once

#include <algorithm>
#include <cstddef>
#include <type_traits>
#include <vector>

#include "core/fast/parallel.hpp"
#include "core/engine/tensor.hpp"

namespace xg {

using Strides = std::vector<std::size_t>;

/// An uninitialised array of `shape` for storage T (float64 arrays through empty_array's pages).
template <class T, class S>
xt::xarray<T> empty_storage(const S& shape) {
    if constexpr (std::is_same_v<T, double>) return empty_array(Shape(shape.begin(), shape.end()));
    else return xt::xarray<T>::from_shape(shape);
}

/// out[i] = f(a[i]) over every element of a contiguous array: the element-wise kernel of the
/// unary ops and activations, for any storage T (f sees the stored value, widened to double when f
/// takes a double, and its result is rounded once into T: a float32 op's store). Large arrays are
/// shared between threads (core/fast/parallel.hpp); f must not depend on which element came before.
template <class T, class F>
xt::xarray<T> map_elements(const xt::xarray<T>& a, F f) {
    xt::xarray<T> out = empty_storage<T>(a.shape());
    const T* pa = a.data();
    T* po = out.data();
    detail::parallel_for(a.size(), 1, [&](std::size_t begin, std::size_t end) {
        for (std::size_t i = begin; i < end; ++i) po[i] = static_cast<T>(f(pa[i]));
    });
    return out;
}

/// Row-major element strides of `shape`.
inline Strides row_major_strides(const Shape& shape) {
    Strides s(shape.size(), 1);
    for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
    return s;
}

/// Strides that read an array of shape `in` as if broadcast to `out` (0 on broadcast axes).
inline Strides broadcast_strides(const Shape& in, const Shape& out) {
    const Strides rm = row_major_strides(in);
    Strides s(out.size(), 0);
    const std::size_t offset = out.size() - in.size();
    for (std::size_t i = 0; i < in.size(); ++i) s[offset + i] = in[i] == 1 ? 0 : rm[i];
    return s;
}

/// Calls f(flat_index, offset) for every index of `shape` in row-major order, where offset is
/// the dot product of the index with `strides`.
template <class F>
void for_each_index(const Shape& shape, const Strides& strides, F&& f) {
    const std::size_t n = shape.size();
    std::size_t total = 1;
    for (std::size_t d : shape) total *= d;
    if (total == 0) return;
    if (n == 0) {
        f(std::size_t{0}, std::size_t{0});
        return;
    }
    std::vector<std::size_t> idx(n, 0);
    std::size_t off = 0, flat = 0;
    const std::size_t inner = shape[n - 1], inner_stride = strides[n - 1];
    while (flat < total) {
        // the common inner strides spelled out: the loop then needs no multiply per element
        if (inner_stride == 1) {
            for (std::size_t j = 0; j < inner; ++j) f(flat++, off + j);
        } else if (inner_stride == 0) {
            for (std::size_t j = 0; j < inner; ++j) f(flat++, off);
        } else {
            for (std::size_t j = 0; j < inner; ++j) f(flat++, off + j * inner_stride);
        }
        for (std::size_t d = n - 1; d-- > 0;) {
            off += strides[d];
            if (++idx[d] < shape[d]) break;
            off -= strides[d] * shape[d];
            idx[d] = 0;
        }
    }
}

/// As for_each_index with two stride sets: f(flat_index, offset_a, offset_b).
template <class F>
void for_each_index2(const Shape& shape, const Strides& sa, const Strides& sb, F&& f) {
    const std::size_t n = shape.size();
    std::size_t total = 1;
    for (std::size_t d : shape) total *= d;
    if (total == 0) return;
    if (n == 0) {
        f(std::size_t{0}, std::size_t{0}, std::size_t{0});
        return;
    }
    std::vector<std::size_t> idx(n, 0);
    std::size_t oa = 0, ob = 0, flat = 0;
    const std::size_t inner = shape[n - 1], ia = sa[n - 1], ib = sb[n - 1];
    while (flat < total) {
        if (ia == 1 && ib == 0) {
            for (std::size_t j = 0; j < inner; ++j) f(flat++, oa + j, ob);
        } else if (ia == 0 && ib == 1) {
            for (std::size_t j = 0; j < inner; ++j) f(flat++, oa, ob + j);
        } else if (ia == 1 && ib == 1) {
            for (std::size_t j = 0; j < inner; ++j) f(flat++, oa + j, ob + j);
        } else {
            for (std::size_t j = 0; j < inner; ++j) f(flat++, oa + j * ia, ob + j * ib);
        }
        for (std::size_t d = n - 1; d-- > 0;) {
            oa += sa[d];
            ob += sb[d];
            if (++idx[d] < shape[d]) break;
            oa -= sa[d] * shape[d];
            ob -= sb[d] * shape[d];
            idx[d] = 0;
        }
    }
}

/// for_each_index(shape, strides, f) on all threads: f(flat, offset) sees the same pairs, each
/// once. The threads split `shape` along its outermost axis of extent >= 2 whose stride is not 0,
/// so for strides that read a row-major array (as broadcast_strides gives) an offset is reached
/// from one thread's block only, and from its flat indices in the serial walk's order: f may add
/// into `offset` (a reduction) or write at `flat`, and the bits do not depend on the thread count.
template <class F>
void parallel_for_each_index(const Shape& shape, const Strides& strides, F&& f) {
    std::size_t total = 1, axis = shape.size();
    for (std::size_t d : shape) total *= d;
    for (std::size_t d = 0; d < shape.size() && axis == shape.size(); ++d) {
        if (shape[d] >= 2 && strides[d] != 0) axis = d;
    }
    if (axis == shape.size() || detail::threads_for(shape[axis], total / shape[axis]) <= 1) {
        for_each_index(shape, strides, f);
        return;
    }
    const Strides flat_strides = row_major_strides(shape);
    detail::parallel_for(shape[axis], total / shape[axis], [&](std::size_t begin, std::size_t end) {
        Shape block = shape;
        block[axis] = end - begin;
        const std::size_t flat0 = begin * flat_strides[axis], offset0 = begin * strides[axis];
        for_each_index2(block, flat_strides, strides,
                        [&](std::size_t, std::size_t flat, std::size_t offset) { f(flat0 + flat, offset0 + offset); });
    });
}

/// for_each_index2(shape, sa, sb, f) on all threads, for an f that writes at `flat` only (a
/// broadcast binary op's output): the threads take contiguous blocks of the outermost axis of
/// extent >= 2.
template <class F>
void parallel_for_each_index2(const Shape& shape, const Strides& sa, const Strides& sb, F&& f) {
    std::size_t total = 1, axis = 0;
    for (std::size_t d : shape) total *= d;
    while (axis < shape.size() && shape[axis] < 2) ++axis;
    if (axis == shape.size() || detail::threads_for(shape[axis], total / shape[axis]) <= 1) {
        for_each_index2(shape, sa, sb, f);
        return;
    }
    detail::parallel_for(shape[axis], total / shape[axis], [&](std::size_t begin, std::size_t end) {
        Shape block = shape;
        block[axis] = end - begin;
        const std::size_t flat0 = begin * (total / shape[axis]), a0 = begin * sa[axis], b0 = begin * sb[axis];
        for_each_index2(block, sa, sb, [&](std::size_t flat, std::size_t oa, std::size_t ob) { f(flat0 + flat, a0 + oa, b0 + ob); });
    });
}

/// Whether two arrays have the same shape (no Shape is built: this runs on every element-wise op).
template <class A, class B>
bool equal_shapes(const A& a, const B& b) {
    return std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
}

/// out[i] = f(a[i], b[i]) with a and b broadcast against each other (NumPy rules): the one
/// kernel of every binary op, forward and backward, for any storage T (f's result rounded once
/// into T; a generic f such as std::plus<> computes in T itself: for +, -, * and / of two floats
/// the same bits as in double rounded once, since double has 53 >= 2 x 24 + 2 bits). A backward
/// zips the incoming gradient with an input (`g * b` for mul) and the result has the gradient's
/// shape; `sum_to` then folds it back to the input's shape. Same shapes and a one-element operand
/// are plain loops; anything else walks strides (no lazy broadcast expression). Throws xg::Error
/// naming `op` and both shapes when they do not broadcast.
template <class T, class F>
xt::xarray<T> broadcast_zip(const xt::xarray<T>& a, const xt::xarray<T>& b, F f, const char* op = "broadcast") {
    const T *pa = a.data(), *pb = b.data();
    // out[i] = value(i) over the elements of `like`'s shape
    const auto elementwise = [](const xt::xarray<T>& like, auto&& value) {
        xt::xarray<T> out = empty_storage<T>(like.shape());
        T* po = out.data();
        detail::parallel_for(out.size(), 1, [&](std::size_t begin, std::size_t end) {
            for (std::size_t i = begin; i < end; ++i) po[i] = static_cast<T>(value(i));
        });
        return out;
    };
    if (equal_shapes(a, b)) return elementwise(a, [&](std::size_t i) { return f(pa[i], pb[i]); });
    if (b.size() == 1 && b.dimension() <= a.dimension()) {  // x * 0.5, g * scale
        const T vb = pb[0];
        return elementwise(a, [&](std::size_t i) { return f(pa[i], vb); });
    }
    if (a.size() == 1 && a.dimension() <= b.dimension()) {  // 1.0 - x
        const T va = pa[0];
        return elementwise(b, [&](std::size_t i) { return f(va, pb[i]); });
    }
    const Shape sa(a.shape().begin(), a.shape().end()), sb(b.shape().begin(), b.shape().end());
    const Shape so = broadcast_shapes(sa, sb, op);
    xt::xarray<T> out = empty_storage<T>(so);
    T* po = out.data();
    parallel_for_each_index2(so, broadcast_strides(sa, so), broadcast_strides(sb, so),
                             [&](std::size_t i, std::size_t ia, std::size_t ib) { po[i] = static_cast<T>(f(pa[ia], pb[ib])); });
    return out;
}

}  // namespace xg
