// Linear, Embedding and Dropout (the norm layers live in nn/modules/norm_layers.cpp).
#include "nn/modules/layers.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "nn/modules/init.hpp"

namespace xg::nn {

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
    if (!(p >= 0.0 && p <= 1.0)) fail("Dropout", fmt::format("probability p must be in [0, 1], got {}", p));
}

Tensor Dropout::forward(const Tensor& x) { return functional::dropout(x, p, is_training()); }

std::string Dropout::extra_repr() const { return fmt::format("p={}", p); }

}  // namespace xg::nn
