#include "nn/modules/distributed_data_parallel.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace xg::nn {

namespace {

// The shapes of `tensors[i]` for i in `indices`, as every rank must agree on them.
std::string layout_of(const std::vector<Tensor>& tensors, const std::vector<std::size_t>& indices) {
    std::string s;
    for (std::size_t i : indices) s += fmt::format("{}{}", s.empty() ? "" : " ", shape_str(tensors[i].shape()));
    return s;
}

std::vector<std::size_t> all_indices(std::size_t n) {
    std::vector<std::size_t> indices(n);
    for (std::size_t i = 0; i < n; ++i) indices[i] = i;
    return indices;
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> wrapped, double bucket_cap_mb,
                                                 bool broadcast_buffers_)
    : broadcast_buffers(broadcast_buffers_) {
    constexpr const char* kOp = "DistributedDataParallel";
    if (!wrapped) fail(kOp, "the module is null");
    if (!(bucket_cap_mb > 0.0)) fail(kOp, fmt::format("bucket_cap_mb must be positive, got {}", bucket_cap_mb));
    module = register_module("module", std::move(wrapped));

    // Every rank starts from rank 0's weights and buffers (each broadcast checks the shapes).
    for (Tensor& p : module->parameters()) distributed::broadcast(p, 0);
    for (Tensor& b : module->buffers()) distributed::broadcast(b, 0);

    // Buckets in reverse registration order: the last layers' gradients are ready first.
    const std::vector<Tensor> params = module->parameters();
    parameter_count_ = params.size();
    const double cap_bytes = bucket_cap_mb * 1024.0 * 1024.0;
    double bytes = 0.0;
    for (std::size_t i = params.size(); i-- > 0;) {
        const double size = static_cast<double>(params[i].value().size() * sizeof(double));
        if (buckets.empty() || (bytes > 0.0 && bytes + size > cap_bytes)) {
            buckets.emplace_back();
            bytes = 0.0;
        }
        buckets.back().push_back(i);
        bytes += size;
    }
    // The layout is checked here, once, on every rank (a collective per bucket), so that
    // reduce_gradients() can all-reduce without a check.
    for (const std::vector<std::size_t>& bucket : buckets) {
        std::size_t total = bucket.size();
        for (std::size_t i : bucket) total += params[i].value().size();
        gradient_buckets_.emplace_back(total, fmt::format("gradients {} and {} flags", layout_of(params, bucket), bucket.size()));
    }
    const std::vector<Tensor> buffers = module->buffers();
    std::size_t buffer_values = 0;
    for (const Tensor& b : buffers) buffer_values += b.value().size();
    if (buffer_values > 0) buffer_bucket_.emplace_back(buffer_values, "buffers " + layout_of(buffers, all_indices(buffers.size())));
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
    if (broadcast_buffers && is_training() && !buffer_bucket_.empty()) {
        distributed::Bucket& flat = buffer_bucket_.front();
        std::vector<Tensor> buffers = module->buffers();
        std::size_t total = 0;
        for (const Tensor& b : buffers) total += b.value().size();
        if (total != flat.size()) {
            fail("DistributedDataParallel.forward",
                 fmt::format("the module's buffers hold {} values, {} when it was wrapped", total, flat.size()));
        }
        const bool source = distributed::rank() == 0;
        double* at = flat.data();
        if (source) {
            for (const Tensor& b : buffers) at = std::copy(b.value().begin(), b.value().end(), at);
        }
        flat.broadcast(0);
        if (!source) {
            at = flat.data();
            for (Tensor& b : buffers) {
                Array& values = b.mutable_value();
                std::copy(at, at + values.size(), values.begin());
                at += values.size();
            }
        }
    }
    return (*module)(x);
}

void DistributedDataParallel::reduce_gradients() {
    constexpr const char* kOp = "DistributedDataParallel.reduce_gradients";
    const std::vector<Tensor> params = module->parameters();
    if (params.size() != parameter_count_) {
        fail(kOp, fmt::format("the module has {} parameters, {} when it was wrapped", params.size(), parameter_count_));
    }
    for (std::size_t k = 0; k < buckets.size(); ++k) {
        const std::vector<std::size_t>& bucket = buckets[k];
        distributed::Bucket& flat = gradient_buckets_[k];
        // Each parameter's gradient (zeros without one), then one has-a-gradient flag per parameter.
        double* at = flat.data();
        double* flags = flat.data() + flat.size() - bucket.size();
        for (std::size_t j = 0; j < bucket.size(); ++j) {
            const Tensor& p = params[bucket[j]];
            const std::size_t n = p.value().size();
            if (at + n > flags) fail(kOp, fmt::format("parameter {} grew to {} values after it was wrapped", bucket[j], n));
            if (p.has_grad()) {
                if (p.grad_value().size() != n) {
                    fail(kOp, fmt::format("parameter {} has {} values but a gradient of {}", bucket[j], n, p.grad_value().size()));
                }
                std::copy(p.grad_value().begin(), p.grad_value().end(), at);
            } else {
                std::fill(at, at + n, 0.0);
            }
            at += n;
            flags[j] = p.has_grad() ? 1.0 : 0.0;
        }
        if (at != flags) fail(kOp, "a parameter shrank after it was wrapped");
        flat.all_reduce(distributed::ReduceOp::AVG);  // a flag > 0: some rank had a gradient
        at = flat.data();
        for (std::size_t j = 0; j < bucket.size(); ++j) {
            Tensor p = params[bucket[j]];
            const std::size_t n = p.value().size();
            if (flags[j] > 0.0) {
                if (!p.has_grad()) p.set_grad(xt::zeros<double>(p.shape()));
                Array& g = p.mutable_grad();
                std::copy(at, at + n, g.begin());
            }
            at += n;
        }
    }
}

std::string DistributedDataParallel::extra_repr() const {
    return fmt::format("buckets={}, broadcast_buffers={}", buckets.size(), broadcast_buffers);
}

}  // namespace xg::nn
