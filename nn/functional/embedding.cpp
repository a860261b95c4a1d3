// Embedding lookup as one graph node: rows out, gradients scatter-added back into the table, on
// the table's own storage (float32 or float64).
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "core/ops/linear_map.hpp"
#include "nn/functional/functional.hpp"
#include "nn/functional/kernel_storage.hpp"
#include "nn/reference/double_sums.hpp"

namespace xg::nn::functional {

namespace {

// The node for the storage type T of the table (kernel_storage.hpp): float for a float32 weight
// (rows copied from and gradients written to its float32 storage: no float64 mirror), double
// otherwise. The backward's scatter-add sums in double and rounds each table entry once.
template <class T>
Tensor embedding_node(const IndexArray& indices, const Tensor& weight, std::size_t rows, std::size_t dim, std::int64_t padding,
                      const Shape& index_shape, const Shape& out_shape) {
    xt::xarray<T> out = xt::xarray<T>::from_shape(out_shape);
    const std::int64_t* idx = indices.data();
    const T* w = detail::kernel_values<T>(weight).data();
    for (std::size_t i = 0; i < indices.size(); ++i) {
        const T* src = w + static_cast<std::size_t>(idx[i]) * dim;
        std::copy(src, src + dim, out.data() + i * dim);
    }
    // d out[i] / d weight[idx[i]] = I: scatter-add each output row's gradient into its table row
    // (none into the padding row, as PyTorch)
    auto read = std::make_shared<const IndexArray>(indices);  // shared by both backwards
    return record("embedding", std::move(out), {weight}, [read, rows, dim, padding](const GradContext& c) -> Grads {
        const IndexArray& indices = *read;
        xt::xarray<T> g = xt::zeros<T>({rows, dim});
        detail::DoubleSums<T> sums(g.data(), rows * dim);  // g itself for double
        double* dg = sums.data();
        const T* seed = detail::kernel_grad<T>(c).data();
        const std::int64_t* ix = indices.data();
        for (std::size_t i = 0; i < indices.size(); ++i) {
            if (ix[i] == padding) continue;
            const T* src = seed + i * dim;
            double* dst = dg + static_cast<std::size_t>(ix[i]) * dim;
            for (std::size_t j = 0; j < dim; ++j) dst[j] += double(src[j]);
        }
        sums.store();
        return grads_of(std::move(g));
    }, {{"indices", index_shape}}, [read, rows, dim, padding, out_shape](const BackwardContext& c) -> std::vector<Tensor> {
        const IndexArray& indices = *read;
        // create_graph: the same scatter-add as a graph node (its backward reads the rows again)
        auto m = std::make_shared<FlatGather>(FlatGather{"embedding", {rows, dim}, out_shape, {}});
        m->offsets.reserve(indices.size() * dim);
        for (std::size_t i = 0; i < indices.size(); ++i) {
            const std::int64_t ix = indices.data()[i];
            for (std::size_t j = 0; j < dim; ++j) {
                m->offsets.push_back(ix == padding ? FlatGather::kNoSource : static_cast<std::size_t>(ix) * dim + j);
            }
        }
        return {scatter_in_graph(c.grad, std::move(m))};
    });
}

}  // namespace

Tensor embedding(const Indices& index_arg, const Tensor& weight, std::optional<std::int64_t> padding_idx) {
    const IndexArray indices = index_arg.get("embedding");
    const Shape ws = weight.shape();
    const Shape is(indices.shape().begin(), indices.shape().end());
    if (ws.size() != 2) fail("embedding", fmt::format("weight must be 2-D (num_embeddings, dim), got {}", shape_str(ws)));
    const std::size_t rows = ws[0], dim = ws[1];
    const auto num = static_cast<std::int64_t>(rows);
    if (padding_idx && (*padding_idx < -num || *padding_idx >= num)) {
        fail("embedding", fmt::format("padding_idx {} is out of range for num_embeddings = {} (weight {})", *padding_idx,
                                      rows, shape_str(ws)));
    }
    // -1 (no padding row) never equals a checked index
    const std::int64_t padding = !padding_idx ? -1 : *padding_idx < 0 ? *padding_idx + num : *padding_idx;
    const std::int64_t* idx = indices.data();
    for (std::size_t i = 0; i < indices.size(); ++i) {
        if (idx[i] < 0 || idx[i] >= num) {
            fail("embedding", fmt::format("index {} (at flat position {} of indices {}) is out of range for "
                                          "num_embeddings = {}", idx[i], i, shape_str(is), rows));
        }
    }
    Shape out_shape = is;
    out_shape.push_back(dim);
    return with_storage_type(weight.dtype(), [&](auto storage) {
        return embedding_node<typename decltype(storage)::type>(indices, weight, rows, dim, padding, is, out_shape);
    });
}

}  // namespace xg::nn::functional
