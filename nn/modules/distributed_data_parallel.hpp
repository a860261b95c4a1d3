// DistributedDataParallel: one model replicated on every rank of an MPI job, each rank training on
// its share of the batch, as torch.nn.parallel.DistributedDataParallel. Part of
// xgrad::distributed (built only with MPI; core/distributed/collectives.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "core/distributed/collectives.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

/// Wraps `module` (registered as the child "module", so state_dict keys read "module.<name>" as
/// in PyTorch). The constructor copies rank 0's parameters and buffers to every rank. After each
/// backward, reduce_gradients() replaces every parameter's gradient by its mean over the ranks,
/// in buckets of about bucket_cap_mb megabytes (parameters in reverse registration order, the
/// order backward produces them), one all_reduce per bucket with the division by the number of
/// ranks fused into it. The buckets are flat buffers kept between steps whose layout the ranks
/// check once, in the constructor (as PyTorch does): a step allocates nothing and runs no check
/// collective. Unlike PyTorch, which does this from hooks during backward, it is one explicit
/// call between backward() and the optimizer's step(). With broadcast_buffers, each training
/// forward first copies rank 0's buffers (BatchNorm's running statistics) to every rank, as
/// PyTorch does, all of them in one broadcast. Every rank must call the constructor, forward()
/// and reduce_gradients() in step (collectives).
class DistributedDataParallel : public Module {
public:
    /// Throws xg::Error when `module` is null or bucket_cap_mb is not positive.
    explicit DistributedDataParallel(std::shared_ptr<Module> module, double bucket_cap_mb = 25.0,
                                     bool broadcast_buffers = true);
    /// The wrapped module's forward (through its hooks), after the buffer broadcast.
    Tensor forward(const Tensor& x) override;
    /// Averages every parameter's gradient over the ranks (in place; the same bits on every rank).
    /// A parameter without a gradient on any rank keeps none; one that has a gradient on some
    /// ranks only gets the mean with zeros for the others.
    void reduce_gradients();
    std::string extra_repr() const override;

    /// The wrapped module.
    std::shared_ptr<Module> module;
    /// The buckets: indices into module->parameters(), in the order they are all-reduced.
    std::vector<std::vector<std::size_t>> buckets;
    /// Whether forward() copies rank 0's buffers first.
    bool broadcast_buffers;

private:
    // One per bucket: its parameters' gradients, then one has-a-gradient flag per parameter.
    std::vector<distributed::Bucket> gradient_buckets_;
    // Every buffer of the module, for the broadcast in forward().
    std::vector<distributed::Bucket> buffer_bucket_;
    std::size_t parameter_count_ = 0;
};

}  // namespace xg::nn
