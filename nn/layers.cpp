// Linear, GELU, Embedding and Dropout (the norm layers live in nn/norm_layers.cpp).
#include "nn/layers.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "nn/init.hpp"

namespace xg::nn {

namespace functional {

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
    Array out = Array::from_shape(out_shape);
    const double* w = weight.value().data();
    for (std::size_t i = 0; i < indices.size(); ++i) {
        const double* src = w + static_cast<std::size_t>(idx[i]) * dim;
        std::copy(src, src + dim, out.data() + i * dim);
    }
    // d out[i] / d weight[idx[i]] = I: scatter-add each output row's gradient into its table row
    // (none into the padding row, as PyTorch)
    return record("embedding", std::move(out), {weight}, [indices, rows, dim, padding](const GradContext& c) -> Grads {
        Array g = xt::zeros<double>({rows, dim});
        const std::int64_t* ix = indices.data();
        for (std::size_t i = 0; i < indices.size(); ++i) {
            if (ix[i] == padding) continue;
            const double* src = c.grad.data() + i * dim;
            double* dst = g.data() + static_cast<std::size_t>(ix[i]) * dim;
            for (std::size_t j = 0; j < dim; ++j) dst[j] += src[j];
        }
        return {std::move(g)};
    }, {{"indices", is}});
}

Tensor dropout(const Tensor& x, double p, bool training, Generator& gen) {
    if (!(p >= 0.0 && p < 1.0)) fail("dropout", fmt::format("probability p must be in [0, 1), got {}", p));
    if (!training || p == 0.0) return x;
    const double keep_scale = 1.0 / (1.0 - p);
    Array mask = Array::from_shape(x.value().shape());  // 0 or 1/(1-p) per element
    for (double& m : mask) m = gen.uniform() < p ? 0.0 : keep_scale;
    Array out = Array::from_shape(x.value().shape());
    const double* px = x.value().data();
    for (std::size_t i = 0; i < out.size(); ++i) out.data()[i] = px[i] * mask.data()[i];
    // d dropout/dx = mask (0 or 1/(1-p))
    const Shape saved_shape = x.shape();
    return record("dropout", std::move(out), {x}, [mask = std::move(mask)](const GradContext& c) -> Grads {
        Array g = Array::from_shape(c.grad.shape());
        for (std::size_t i = 0; i < g.size(); ++i) g.data()[i] = c.grad.data()[i] * mask.data()[i];
        return {std::move(g)};
    }, {{"mask", saved_shape}});
}

}  // namespace functional

// ---- Linear -------------------------------------------------------------------------------------

Linear::Linear(std::int64_t in, std::int64_t out, bool with_bias)
    : in_features(positive_size(in, "Linear", "in_features")), out_features(positive_size(out, "Linear", "out_features")) {
    register_parameter("weight", weight, init::kaiming_uniform_(zeros({out_features, in_features}), std::sqrt(5.0)));
    if (with_bias) {
        const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
        register_parameter("bias", bias, init::uniform_(zeros({out_features}), -bound, bound));
    }
}

Tensor Linear::forward(const Tensor& x) {
    const Shape s = x.shape();
    if (s.empty() || s.back() != in_features) {
        fail("Linear", fmt::format("input of shape {} does not end in in_features = {} (weight {})", shape_str(s),
                                   in_features, shape_str(weight.shape())));
    }
    return functional::linear(x, weight, bias);
}

std::string Linear::extra_repr() const {
    return fmt::format("in_features={}, out_features={}, bias={}", in_features, out_features, bias.defined());
}

// ---- GELU ---------------------------------------------------------------------------------------

GELU::GELU(functional::GeluApproximate approx) : approximate(approx) {}

Tensor GELU::forward(const Tensor& x) { return functional::gelu(x, approximate); }

std::string GELU::extra_repr() const {
    return approximate == functional::GeluApproximate::tanh ? "approximate='tanh'" : "approximate='none'";
}

// ---- Embedding ----------------------------------------------------------------------------------

Embedding::Embedding(std::int64_t num_rows, std::int64_t dim_, std::optional<std::int64_t> padding)
    : num_embeddings(positive_size(num_rows, "Embedding", "num_embeddings")),
      embedding_dim(positive_size(dim_, "Embedding", "embedding_dim")) {
    const std::size_t num = num_embeddings, dim = embedding_dim;
    if (padding) {
        const auto n = static_cast<std::int64_t>(num);
        if (*padding < -n || *padding >= n) {
            fail("Embedding", fmt::format("padding_idx {} must be in [-{}, {}) for num_embeddings = {}", *padding, n, n, num));
        }
        padding_idx = *padding < 0 ? *padding + n : *padding;  // PyTorch stores it non-negative
    }
    register_parameter("weight", weight, init::normal_(zeros({num, dim})));
    if (padding_idx) {  // PyTorch's reset_parameters: the padding row starts at zero
        double* row = weight.data() + static_cast<std::size_t>(*padding_idx) * dim;
        std::fill(row, row + dim, 0.0);
    }
}

Tensor Embedding::forward(const Indices& indices) {
    return functional::embedding(indices.get("Embedding"), weight, padding_idx);
}

Tensor Embedding::forward(const Tensor& indices) { return forward(Indices(indices)); }

std::string Embedding::extra_repr() const {
    std::string s = fmt::format("{}, {}", num_embeddings, embedding_dim);
    if (padding_idx) s += fmt::format(", padding_idx={}", *padding_idx);
    return s;
}

// ---- Dropout ------------------------------------------------------------------------------------

Dropout::Dropout(double prob) : p(prob) {
    if (!(p >= 0.0 && p < 1.0)) fail("Dropout", fmt::format("probability p must be in [0, 1), got {}", p));
}

Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}", p); }

}  // namespace xg::nn
