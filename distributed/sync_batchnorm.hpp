// SyncBatchNorm: BatchNorm whose statistics span the batch of every rank of an MPI job, as
// torch.nn.SyncBatchNorm. Part of xgrad::distributed (built only with MPI; distributed/collectives.hpp).
// The derivation of its forward and backward, and what crosses between ranks, is in
// docs/derivations/sync_batchnorm.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "nn/modules/module.hpp"
#include "nn/modules/norm_layers.hpp"

namespace xg::nn {

/// Batch normalisation of (N, C, *) per channel over the union of every rank's batch (N may
/// differ between ranks, 0 included). In training, each rank's (count, mean, sum of squared
/// deviations) per channel are all-gathered and merged (Chan et al.); the backward all-reduces
/// (sum g, sum g (x - mean)) per channel. The weight and bias gradients stay each rank's own part,
/// to be summed or averaged by DistributedDataParallel (as in PyTorch). Evaluation uses the
/// running statistics and no communication. Every rank must call forward() and backward() in step
/// (collectives); xg::distributed::init() must have run.
class SyncBatchNorm : public BatchNormBase {
public:
    /// As BatchNorm1d: throws xg::Error when num_features is not positive or momentum is outside
    /// [0, 1]. forward() takes (N, num_features, *) with at least 2 axes and keeps the shape.
    explicit SyncBatchNorm(std::int64_t num_features, double eps = 1e-5, std::optional<double> momentum = 0.1,
                           bool affine = true, bool track_running_stats = true);
    /// The synchronised forward in training; BatchNormBase::forward (local, running statistics) in
    /// evaluation. A global batch of at most one value per channel throws on every rank.
    Tensor forward(const Tensor& x) override;

protected:
    void check_input_dim(const Shape& x_shape) const override;
};

/// Replaces every BatchNorm1d and BatchNorm2d in `module`'s tree by a SyncBatchNorm with the same
/// arguments and mode, holding the BatchNorm's own parameter and buffer tensors (not copies, as
/// torch.nn.SyncBatchNorm.convert_sync_batchnorm): their dtype stays, and an optimizer made before
/// the conversion still trains them. Returns the module (a new one when `module` itself is a
/// BatchNorm). Children are replaced in
/// their parents' registries, which is what Sequential, ModuleList and state_dict use; a typed
/// member pointer a custom module keeps to its BatchNorm still points to the old one, so such a
/// module should build SyncBatchNorm itself.
std::shared_ptr<Module> convert_sync_batchnorm(std::shared_ptr<Module> module);

}  // namespace xg::nn
