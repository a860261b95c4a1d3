#include "nn/modules/distributed_data_parallel.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "core/distributed/collectives.hpp"

namespace xg::nn {

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> wrapped, double bucket_cap_mb,
                                                 bool broadcast_buffers_)
    : broadcast_buffers(broadcast_buffers_) {
    constexpr const char* kOp = "DistributedDataParallel";
    if (!wrapped) fail(kOp, "the module is null");
    if (!(bucket_cap_mb > 0.0)) fail(kOp, fmt::format("bucket_cap_mb must be positive, got {}", bucket_cap_mb));
    module = register_module("module", std::move(wrapped));

    // Every rank starts from rank 0's weights and buffers.
    for (Tensor& p : module->parameters()) distributed::broadcast(p, 0);
    for (Tensor& b : module->buffers()) distributed::broadcast(b, 0);

    // Buckets in reverse registration order: the last layers' gradients are ready first.
    const std::vector<Tensor> params = module->parameters();
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
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
    if (broadcast_buffers && is_training()) {
        for (Tensor& b : module->buffers()) distributed::broadcast(b, 0);
    }
    return (*module)(x);
}

void DistributedDataParallel::reduce_gradients() {
    const std::vector<Tensor> params = module->parameters();
    for (const std::vector<std::size_t>& bucket : buckets) {
        // One flat array per bucket: each parameter's gradient (zeros without one), then one
        // has-a-gradient flag per parameter.
        std::size_t total = bucket.size();
        for (std::size_t i : bucket) total += params[i].value().size();
        Array flat = xt::zeros<double>({total});
        std::size_t offset = 0;
        for (std::size_t i : bucket) {
            if (params[i].has_grad()) std::copy(params[i].grad_value().begin(), params[i].grad_value().end(), flat.begin() + offset);
            offset += params[i].value().size();
        }
        for (std::size_t j = 0; j < bucket.size(); ++j) flat(offset + j) = params[bucket[j]].has_grad() ? 1.0 : 0.0;
        distributed::all_reduce(flat, distributed::ReduceOp::AVG);
        offset = 0;
        for (std::size_t j = 0; j < bucket.size(); ++j) {
            Tensor p = params[bucket[j]];
            const std::size_t n = p.value().size();
            if (flat(total - bucket.size() + j) > 0.0) {
                if (!p.has_grad()) p.node()->grad = xt::zeros<double>(p.shape());
                Array& g = p.mutable_grad();
                std::copy(flat.begin() + offset, flat.begin() + offset + n, g.begin());
            }
            offset += n;
        }
    }
}

std::string DistributedDataParallel::extra_repr() const {
    return fmt::format("buckets={}, broadcast_buffers={}", buckets.size(), broadcast_buffers);
}

}  // namespace xg::nn
