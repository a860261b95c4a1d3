// xg::distributed: the processes of an `mpirun` launch as one training job, with the names of
// torch.distributed (init, rank, world_size, barrier, all_reduce, all_gather, broadcast).
//
// Built only when CMake finds MPI (Debian's Open MPI), into the library xgrad::distributed; the
// rest of xgrad never depends on it, and this header includes no MPI header. Every collective is
// called by every rank in the same order (as in MPI and torch.distributed), outside the graph:
// it reads and writes values, never records a node.
//
// Determinism: all_reduce combines every value in one fixed, documented order (small payloads in
// rank order on every rank, large ones by a ring written over MPI's point-to-point calls: each
// chunk summed along the ring on one rank, then handed to all), so every rank gets the same bits,
// and the same launch gives the same bits every run, whatever MPI's own algorithm choices.
//
// Faults: init() installs a terminate handler, so an exception that leaves main() on one rank
// prints "rank r: <what()>" and calls MPI_Abort, which stops every rank of the job within seconds
// instead of leaving the others waiting in a collective. A rank killed by a signal is noticed by
// mpirun, which stops the rest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/tensor.hpp"

namespace xg::distributed {

/// Payloads up to this many bytes times (world_size() - 1) are all-reduced by one all-gather and a
/// sum in rank order on every rank, larger ones by a ring (docs/distributed.md, "Determinism").
constexpr std::size_t kExchangeBytes = 64 * 1024;

/// How all_reduce combines the ranks' values (torch.distributed.ReduceOp).
enum class ReduceOp { SUM, AVG, MAX, MIN };

/// Joins the job launched by mpirun (MPI_Init_thread; a plain program run alone is a job of one).
/// Calling it again is a no-op. MPI is finalised at exit. Installs the abort-on-exception handler.
void init();
/// True between init() and the program's exit.
bool is_initialized();
/// This process's rank, 0 .. world_size() - 1; throws xg::Error naming the call before init().
int rank();
/// The number of processes in the job.
int world_size();
/// Waits until every rank has called it.
void barrier();

/// Combines `tensor`'s values over the ranks in place (every rank gets the same bits), allocating
/// nothing. The shapes must agree on every rank: a small all_reduce of a shape fingerprint checks
/// it first, and a mismatch throws xg::Error on every rank, naming each rank's shape. A float32
/// tensor is combined in double and each result rounded once into its float32 storage (no float64
/// mirror; this one allocates a widened copy).
void all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM);
/// all_reduce of a plain array.
void all_reduce(Array& values, ReduceOp op = ReduceOp::SUM);

/// A flat array of doubles, kept between calls, whose layout every rank has agreed on once, so
/// that its all_reduce() needs neither an allocation nor a check per call: DistributedDataParallel's
/// gradient buckets (PyTorch's GradBucket). Constructing one is a collective: every rank must
/// pass the same size and `layout` (a description, e.g. the shapes packed into it), else every
/// rank throws xg::Error naming each rank's layout.
class Bucket {
public:
    Bucket(std::size_t size, const std::string& layout);
    Bucket(Bucket&&) noexcept;
    Bucket& operator=(Bucket&&) noexcept;
    ~Bucket();  ///< waits for an all-reduce still in flight
    double* data() { return values_.data(); }
    const double* data() const { return values_.data(); }
    std::size_t size() const { return values_.size(); }
    /// Combines the values over the ranks in place, as all_reduce(Array&), without its shape check.
    void all_reduce(ReduceOp op = ReduceOp::SUM);
    /// Copies rank `src`'s values to every rank, as broadcast(Array&), without its shape check.
    void broadcast(int src = 0);

    /// Starts all_reduce(op) and returns at once (MPI's nonblocking point-to-point calls, with
    /// this bucket's own message tags): the same exchange or ring, the same sums in the same
    /// order, so the result has all_reduce(op)'s bits. Until
    /// wait() returns, the values must be neither read nor written. MPI moves a transfer on only
    /// inside MPI calls: call test() now and then (DistributedDataParallel does, from its gradient
    /// hooks), then wait(). Several buckets may be in flight at once, and collectives may run
    /// meanwhile (a started bucket makes no collective call). Throws xg::Error when this bucket's
    /// all-reduce is already in flight.
    void start_all_reduce(ReduceOp op = ReduceOp::SUM);
    /// Moves the all-reduce in flight on without blocking; true once it has finished (or when none
    /// was started).
    bool test();
    /// Finishes the all-reduce in flight (nothing when none is).
    void wait();
    /// Whether an all-reduce was started and has not finished yet.
    bool in_flight() const;

private:
    struct Transfer;  // a started all-reduce: its MPI requests, step and scratch (collectives.cpp)
    std::vector<double> values_;
    std::unique_ptr<Transfer> transfer_;
    int tag_ = 0;  // the message tags of this bucket's ring (the same on every rank)
};

/// Every rank's `tensor`, in rank order; the shapes may differ between ranks. A float32 tensor's
/// values travel widened (exactly) from a scratch copy: no float64 mirror.
std::vector<Array> all_gather(const Tensor& tensor);
/// all_gather of a plain array.
std::vector<Array> all_gather(const Array& values);
/// The ranks' arrays concatenated along axis 0 (their other axes must agree), e.g. the global
/// batch from each rank's share.
Array all_gather_rows(const Array& values);
/// Copies rank `src`'s values into `tensor` on every rank (the shapes must agree). A float32
/// tensor's values travel widened and are stored back in its float32 storage: no float64 mirror.
void broadcast(Tensor& tensor, int src = 0);
/// broadcast of a plain array.
void broadcast(Array& values, int src = 0);
/// Rank `src`'s string on every rank (e.g. a file name chosen by rank 0).
std::string broadcast_string(const std::string& text, int src = 0);

/// Prints "rank r: message" to stderr and stops every rank of the job with `code` (MPI_Abort).
[[noreturn]] void abort(const std::string& message, int code = 1);

/// Bytes of payload this rank has handed to collectives since the last reset: all_reduce and
/// broadcast count their array, all_gather this rank's part. What an algorithm moves on the
/// wire is a multiple of this (docs/distributed.md, "What a step sends").
std::uint64_t bytes_sent();
/// Sets bytes_sent() back to 0.
void reset_bytes_sent();

}  // namespace xg::distributed
