#include "distributed/data_parallel.hpp"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace xg::nn {

namespace {

// The shapes of `tensors[i]` for i in `indices`, as every rank must agree on them.
std::string layout_of(const std::vector<Tensor>& tensors, const std::vector<std::size_t>& indices) {
    std::string s;
    for (std::size_t i : indices) s += fmt::format("{}{}", s.empty() ? "" : " ", shape_str(tensors[i].shape()));
    return s;
}

double seconds_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

std::vector<std::size_t> all_indices(std::size_t n) {
    std::vector<std::size_t> indices(n);
    for (std::size_t i = 0; i < n; ++i) indices[i] = i;
    return indices;
}

enum class Part { values, gradient };
enum class Way { to_bucket, from_bucket };

// Copies n values of t's values or gradient, in its own storage (T: float for a float32 tensor,
// double for a float64 one), to or from their place `at` in a bucket, so that no float64 mirror is
// made. The buckets stay double: the ranks' floats are summed in double and each mean is rounded
// once into float32, the bits the mirror gave. Copies nothing and returns that storage's size
// when it is not n.
template <class T>
std::size_t transfer(Tensor& t, Part part, Way way, double* at, std::size_t n) {
    if (way == Way::to_bucket) {
        const xt::xarray<T>& from = part == Part::gradient ? t.grad_values<T>() : t.values<T>();
        if (from.size() == n) std::copy(from.begin(), from.end(), at);
        return from.size();
    }
    xt::xarray<T>& to = part == Part::gradient ? t.mutable_grad_values<T>() : t.mutable_values<T>();
    if (to.size() == n) {
        for (std::size_t i = 0; i < n; ++i) to.data()[i] = static_cast<T>(at[i]);
    }
    return to.size();
}

std::size_t transfer(Tensor& t, Part part, Way way, double* at, std::size_t n) {
    return t.dtype() == Dtype::Float32 ? transfer<float>(t, part, way, at, n) : transfer<double>(t, part, way, at, n);
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

    // Buckets in reverse registration order: the last layers' gradients are ready first. The first
    // bucket holds at most 1 MiB (PyTorch's first-bucket cap), so that its all-reduce can start
    // while most of backward is still to run.
    const std::vector<Tensor> params = module->parameters();
    parameter_count_ = params.size();
    const double cap_bytes = bucket_cap_mb * 1024.0 * 1024.0, first_cap_bytes = std::min(cap_bytes, 1024.0 * 1024.0);
    double bytes = 0.0;
    for (std::size_t i = params.size(); i-- > 0;) {
        const double size = static_cast<double>(params[i].numel() * sizeof(double));
        const double cap = buckets.size() == 1 ? first_cap_bytes : cap_bytes;
        if (buckets.empty() || (bytes > 0.0 && bytes + size > cap)) {
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
        for (std::size_t i : bucket) total += params[i].numel();
        gradient_buckets_.emplace_back(total, fmt::format("gradients {} and {} flags", layout_of(params, bucket), bucket.size()));
    }
    const std::vector<Tensor> buffers = module->buffers();
    std::size_t buffer_values = 0;
    for (const Tensor& b : buffers) buffer_values += b.numel();
    if (buffer_values > 0) buffer_bucket_.emplace_back(buffer_values, "buffers " + layout_of(buffers, all_indices(buffers.size())));

    // Each parameter tells its bucket when its gradient is in .grad (the overlap with backward).
    parameters_ = params;
    bucket_of_.assign(params.size(), 0);
    for (std::size_t k = 0; k < buckets.size(); ++k) {
        for (std::size_t i : buckets[k]) bucket_of_[i] = k;
    }
    ready_.assign(params.size(), 0);
    ready_in_bucket_.assign(buckets.size(), 0);
    needed_in_bucket_.assign(buckets.size(), 0);
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (!params[i].requires_grad()) continue;  // a frozen parameter's bucket does not wait for it
        ++needed_in_bucket_[bucket_of_[i]];
        hooks_.push_back(params[i].register_post_accumulate_grad_hook([this, i](const Tensor&) { on_gradient_ready(i); }));
    }
    timeline_.started_ms.assign(buckets.size(), 0.0);
    timeline_.finished_ms.assign(buckets.size(), 0.0);
}

DistributedDataParallel::~DistributedDataParallel() {
    for (RemovableHandle& hook : hooks_) hook.remove();
}

double DistributedDataParallel::now_ms() const { return (seconds_now() - step_origin_s_) * 1e3; }

Tensor DistributedDataParallel::forward(const Tensor& x) {
    if (broadcast_buffers && is_training() && !buffer_bucket_.empty()) {
        distributed::Bucket& flat = buffer_bucket_.front();
        std::vector<Tensor> buffers = module->buffers();
        std::size_t total = 0;
        for (const Tensor& b : buffers) total += b.numel();
        if (total != flat.size()) {
            fail("DistributedDataParallel.forward",
                 fmt::format("the module's buffers hold {} values, {} when it was wrapped", total, flat.size()));
        }
        const bool source = distributed::rank() == 0;
        double* at = flat.data();
        if (source) {
            for (Tensor& b : buffers) at += transfer(b, Part::values, Way::to_bucket, at, b.numel());
        }
        flat.broadcast(0);
        if (!source) {
            for (Tensor& b : buffers) at += transfer(b, Part::values, Way::from_bucket, at, b.numel());
        }
    }
    step_origin_s_ = seconds_now();
    return (*module)(x);
}

// Called by parameter i's hook once backward has added its gradient to .grad.
void DistributedDataParallel::on_gradient_ready(std::size_t i) {
    if (stale_) return;
    if (ready_[i]) {  // a second backward before reduce_gradients(): its bucket may be out already
        stale_ = true;
        return;
    }
    if (!overlap || no_sync_depth_ > 0) return;
    ready_[i] = 1;
    if (++ready_in_bucket_[bucket_of_[i]] == needed_in_bucket_[bucket_of_[i]]) start_ready_buckets();
    test_started();  // MPI moves the buckets in flight on only inside MPI calls
}

// Starts the buckets whose gradients are all in, in bucket order, as PyTorch's DDP does: a bucket
// waits for the ones before it. (MPI would not need the order: each bucket's messages carry its
// own tags.)
void DistributedDataParallel::start_ready_buckets() {
    while (next_bucket_ < buckets.size() && ready_in_bucket_[next_bucket_] == needed_in_bucket_[next_bucket_]) start(next_bucket_++);
}

// Packs bucket k (each parameter's gradient, zeros without one, then one has-a-gradient flag per
// parameter) and starts its all-reduce.
void DistributedDataParallel::start(std::size_t k) {
    constexpr const char* kOp = "DistributedDataParallel.reduce_gradients";
    const std::vector<std::size_t>& bucket = buckets[k];
    distributed::Bucket& flat = gradient_buckets_[k];
    double* at = flat.data();
    double* flags = flat.data() + flat.size() - bucket.size();
    for (std::size_t j = 0; j < bucket.size(); ++j) {
        Tensor p = parameters_[bucket[j]];
        const std::size_t n = p.numel();
        if (at + n > flags) fail(kOp, fmt::format("parameter {} grew to {} values after it was wrapped", bucket[j], n));
        if (p.has_grad()) {
            const std::size_t got = transfer(p, Part::gradient, Way::to_bucket, at, n);
            if (got != n) fail(kOp, fmt::format("parameter {} has {} values but a gradient of {}", bucket[j], n, got));
        } else {
            std::fill(at, at + n, 0.0);
        }
        at += n;
        flags[j] = p.has_grad() ? 1.0 : 0.0;
    }
    if (at != flags) fail(kOp, "a parameter shrank after it was wrapped");
    flat.start_all_reduce(distributed::ReduceOp::AVG);  // a flag > 0: some rank had a gradient
    timeline_.started_ms[k] = now_ms();
    timeline_.finished_ms[k] = flat.in_flight() ? 0.0 : timeline_.started_ms[k];
}

void DistributedDataParallel::test_started() {
    for (std::size_t k = 0; k < next_bucket_; ++k) {
        if (gradient_buckets_[k].in_flight() && gradient_buckets_[k].test()) timeline_.finished_ms[k] = now_ms();
    }
}

// Waits for every bucket started and writes the means into .grad.
void DistributedDataParallel::finish_all() {
    for (std::size_t k = 0; k < buckets.size(); ++k) {
        distributed::Bucket& flat = gradient_buckets_[k];
        if (flat.in_flight()) {
            flat.wait();
            timeline_.finished_ms[k] = now_ms();
        }
        const std::vector<std::size_t>& bucket = buckets[k];
        double* at = flat.data();
        const double* flags = flat.data() + flat.size() - bucket.size();
        for (std::size_t j = 0; j < bucket.size(); ++j) {
            Tensor p = parameters_[bucket[j]];
            const std::size_t n = p.numel();
            if (flags[j] > 0.0) {
                if (!p.has_grad()) p.set_grad(xt::zeros<double>(p.shape()));
                transfer(p, Part::gradient, Way::from_bucket, at, n);
            }
            at += n;
        }
    }
}

void DistributedDataParallel::reduce_gradients() {
    constexpr const char* kOp = "DistributedDataParallel.reduce_gradients";
    timeline_.reduce_entered_ms = now_ms();
    const std::size_t now_has = module->parameters().size();
    if (now_has != parameter_count_) {
        fail(kOp, fmt::format("the module has {} parameters, {} when it was wrapped", now_has, parameter_count_));
    }
    if (stale_) {  // what backward started holds an earlier backward's gradients: start again
        for (distributed::Bucket& flat : gradient_buckets_) flat.wait();
        next_bucket_ = 0;
    }
    while (next_bucket_ < buckets.size()) start(next_bucket_++);
    finish_all();
    std::fill(ready_.begin(), ready_.end(), 0);
    std::fill(ready_in_bucket_.begin(), ready_in_bucket_.end(), 0);
    next_bucket_ = 0;
    stale_ = false;
    timeline_.reduce_returned_ms = now_ms();
}

std::string DistributedDataParallel::extra_repr() const {
    return fmt::format("buckets={}, broadcast_buffers={}", buckets.size(), broadcast_buffers);
}

}  // namespace xg::nn
