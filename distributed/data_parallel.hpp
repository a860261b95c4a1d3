// DistributedDataParallel: one model replicated on every rank of an MPI job, each rank training on
// its share of the batch, as torch.nn.parallel.DistributedDataParallel. Part of
// xgrad::distributed (built only with MPI; distributed/collectives.hpp).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "distributed/collectives.hpp"
#include "nn/modules/module.hpp"

namespace xg::nn {

/// Wraps `module` (registered as the child "module", so state_dict keys read "module.<name>" as
/// in PyTorch). The constructor copies rank 0's parameters and buffers to every rank.
///
/// Gradients are averaged over the ranks in buckets of about bucket_cap_mb megabytes, the first
/// one at most 1 MiB as in PyTorch (parameters in reverse registration order, the order backward
/// produces them; the size counts 8 bytes a value, what the bucket sends), one all-reduce per bucket
/// with the division by the number of ranks fused into it. As in PyTorch, each bucket's
/// all-reduce starts during backward, from a hook on each parameter
/// (Tensor::register_post_accumulate_grad_hook), as soon as the last of its gradients is in
/// .grad, while backward goes on with the layers below; buckets start in order, 0, 1, ..., on
/// every rank. reduce_gradients(), one explicit call between backward() and the optimizer's
/// step(), starts the buckets not started yet, waits for all of them and writes the means into
/// .grad: the same bits as reducing every bucket after backward (overlap = false), since each
/// bucket is summed in the same fixed order either way (distributed::Bucket::start_all_reduce).
/// A second backward before reduce_gradients() (gradient accumulation) makes it reduce again
/// after backward, correct but without overlap: accumulate under no_sync() instead, as in PyTorch.
///
/// The buckets are flat buffers kept between steps whose layout the ranks check once, in the
/// constructor (as PyTorch does): a step allocates nothing and runs no check collective. With
/// broadcast_buffers, each training forward first copies rank 0's buffers (BatchNorm's running
/// statistics) to every rank, as PyTorch does, all of them in one broadcast. Every rank must call
/// the constructor, forward(), backward() and reduce_gradients() in step (collectives).
class DistributedDataParallel : public Module {
public:
    /// Throws xg::Error when `module` is null or bucket_cap_mb is not positive.
    explicit DistributedDataParallel(std::shared_ptr<Module> module, double bucket_cap_mb = 25.0,
                                     bool broadcast_buffers = true);
    ~DistributedDataParallel() override;
    /// The wrapped module's forward (through its hooks), after the buffer broadcast.
    Tensor forward(const Tensor& x) override;
    /// Averages every parameter's gradient over the ranks (in place; the same bits on every rank).
    /// A parameter without a gradient on any rank keeps none; one that has a gradient on some
    /// ranks only gets the mean with zeros for the others.
    void reduce_gradients();
    std::string extra_repr() const override;

    /// While the returned guard lives, backward starts no all-reduce (PyTorch's no_sync): for
    /// gradient accumulation, backward the first micro-batches under it, the last one outside,
    /// then reduce_gradients(). Guards nest.
    class NoSyncGuard {
    public:
        explicit NoSyncGuard(DistributedDataParallel& ddp) : ddp_(&ddp) { ++ddp_->no_sync_depth_; }
        NoSyncGuard(const NoSyncGuard&) = delete;
        NoSyncGuard& operator=(const NoSyncGuard&) = delete;
        ~NoSyncGuard() { --ddp_->no_sync_depth_; }

    private:
        DistributedDataParallel* ddp_;
    };
    /// `{ auto guard = ddp.no_sync(); loss.backward(); }`
    [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

    /// The last step's communication, in milliseconds since its forward() began: when each
    /// bucket's all-reduce started and when it was seen finished (MPI reports it inside the
    /// hooks' test calls or reduce_gradients()'s wait), and when reduce_gradients() was entered
    /// and returned. A bucket started before reduce_gradients() was entered overlapped backward.
    struct Timeline {
        std::vector<double> started_ms, finished_ms;
        double reduce_entered_ms = 0.0, reduce_returned_ms = 0.0;
    };
    const Timeline& last_timeline() const { return timeline_; }

    /// The wrapped module.
    std::shared_ptr<Module> module;
    /// The buckets: indices into module->parameters(), in the order they are all-reduced.
    std::vector<std::vector<std::size_t>> buckets;
    /// Whether forward() copies rank 0's buffers first.
    bool broadcast_buffers;
    /// Whether backward starts the buckets' all-reduces (true, PyTorch's way); false leaves them
    /// all to reduce_gradients(), after backward. The results are the same bits either way.
    bool overlap = true;

private:
    void on_gradient_ready(std::size_t parameter);
    void start_ready_buckets();
    void start(std::size_t bucket);
    void test_started();
    void finish_all();
    double now_ms() const;

    // One per bucket: its parameters' gradients, then one has-a-gradient flag per parameter.
    std::vector<distributed::Bucket> gradient_buckets_;
    // Every buffer of the module, for the broadcast in forward().
    std::vector<distributed::Bucket> buffer_bucket_;
    std::size_t parameter_count_ = 0;
    // The parameters as wrapped (their hooks call on_gradient_ready) and each one's bucket.
    std::vector<Tensor> parameters_;
    std::vector<std::size_t> bucket_of_;
    std::vector<RemovableHandle> hooks_;
    // This step: which gradients are in, how many per bucket, the next bucket to start.
    std::vector<char> ready_;
    std::vector<std::size_t> ready_in_bucket_, needed_in_bucket_;
    std::size_t next_bucket_ = 0;
    bool stale_ = false;  // a gradient came in twice: reduce everything again after backward
    int no_sync_depth_ = 0;
    double step_origin_s_ = 0.0;
    Timeline timeline_;
};

}  // namespace xg::nn
