// The collectives of core/distributed/collectives.hpp over Open MPI's C API. Only this file includes mpi.h.
#include "core/distributed/collectives.hpp"

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <iostream>

#include <fmt/format.h>

namespace xg::distributed {

namespace {

std::uint64_t g_bytes_sent = 0;

bool mpi_running() {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized && !finalized;
}

void require_init(const char* op) {
    if (!mpi_running()) fail(op, "call xg::distributed::init() first (the program must run under mpirun, or alone)");
}

int as_count(std::size_t n, const char* op) {
    if (n > static_cast<std::size_t>(INT_MAX)) fail(op, fmt::format("{} elements are more than one MPI call carries", n));
    return static_cast<int>(n);
}

void finalize_at_exit() {
    if (mpi_running()) MPI_Finalize();
}

// An exception that leaves main() on one rank would leave the others waiting in their next
// collective: stop the whole job instead, with that rank's message.
[[noreturn]] void abort_on_uncaught_exception() {
    std::string what = "terminate called without an active exception";
    if (const std::exception_ptr e = std::current_exception()) {
        try {
            std::rethrow_exception(e);
        } catch (const std::exception& ex) {
            what = fmt::format("uncaught exception: {}", ex.what());
        } catch (...) {
            what = "uncaught exception of a type not derived from std::exception";
        }
    }
    abort(what, 1);
}

// The shapes of every rank, in rank order.
std::vector<Shape> gather_shapes(const Shape& shape, const char* op) {
    const int world = world_size();
    const int ndim = as_count(shape.size(), op);
    std::vector<int> ndims(static_cast<std::size_t>(world));
    MPI_Allgather(&ndim, 1, MPI_INT, ndims.data(), 1, MPI_INT, MPI_COMM_WORLD);
    std::vector<int> displs(static_cast<std::size_t>(world), 0);
    for (int r = 1; r < world; ++r) displs[r] = displs[r - 1] + ndims[r - 1];
    std::vector<std::uint64_t> mine(shape.begin(), shape.end());
    std::vector<std::uint64_t> all(static_cast<std::size_t>(displs.back() + ndims.back()));
    MPI_Allgatherv(mine.data(), ndim, MPI_UINT64_T, all.data(), ndims.data(), displs.data(), MPI_UINT64_T, MPI_COMM_WORLD);
    std::vector<Shape> shapes(static_cast<std::size_t>(world));
    for (int r = 0; r < world; ++r) shapes[r].assign(all.begin() + displs[r], all.begin() + displs[r] + ndims[r]);
    return shapes;
}

std::string shapes_str(const std::vector<Shape>& shapes) {
    std::string s;
    for (std::size_t r = 0; r < shapes.size(); ++r) s += fmt::format("{}rank {}: {}", r ? ", " : "", r, shape_str(shapes[r]));
    return s;
}

// Throws on every rank (never on some only, which would leave the others waiting) when the ranks'
// shapes differ. One small all_reduce of a shape fingerprint; the shapes are gathered only to word
// the error.
void require_same_shape(const Shape& shape, const char* op) {
    std::uint64_t fingerprint = shape.size();
    for (std::size_t extent : shape) fingerprint = fingerprint * 1000003u + extent;
    // the largest fingerprint and the largest complement: equal fingerprints iff max == ~max(~f)
    std::uint64_t bounds[2] = {fingerprint, ~fingerprint};
    MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (bounds[0] == ~bounds[1]) return;
    fail(op, fmt::format("every rank must pass the same shape, got {}", shapes_str(gather_shapes(shape, op))));
}

Shape shape_of(const Array& a) { return Shape(a.shape().begin(), a.shape().end()); }

MPI_Op mpi_op(ReduceOp op) {
    switch (op) {
        case ReduceOp::MAX: return MPI_MAX;
        case ReduceOp::MIN: return MPI_MIN;
        default: return MPI_SUM;  // AVG is a sum divided by the number of ranks
    }
}

}  // namespace

void init() {
    if (mpi_running()) return;
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    std::atexit(finalize_at_exit);
    std::set_terminate(abort_on_uncaught_exception);
}

bool is_initialized() { return mpi_running(); }

int rank() {
    require_init("distributed.rank");
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    return r;
}

int world_size() {
    require_init("distributed.world_size");
    int n = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    return n;
}

void barrier() {
    require_init("distributed.barrier");
    MPI_Barrier(MPI_COMM_WORLD);
}

void all_reduce(Array& values, ReduceOp op) {
    constexpr const char* kOp = "distributed.all_reduce";
    require_init(kOp);
    require_same_shape(shape_of(values), kOp);
    const std::size_t world = static_cast<std::size_t>(world_size());
    g_bytes_sent += values.size() * sizeof(double);
    if (world == 1 || values.size() == 0) return;
    // Each rank reduces one slice (the last ones padded with zeros), then all slices go to everyone.
    const std::size_t slice = (values.size() + world - 1) / world;
    std::vector<double> padded(slice * world, 0.0), mine(slice), all(slice * world);
    std::copy(values.begin(), values.end(), padded.begin());
    MPI_Reduce_scatter_block(padded.data(), mine.data(), as_count(slice, kOp), MPI_DOUBLE, mpi_op(op), MPI_COMM_WORLD);
    if (op == ReduceOp::AVG) {
        for (double& v : mine) v /= static_cast<double>(world);
    }
    MPI_Allgather(mine.data(), as_count(slice, kOp), MPI_DOUBLE, all.data(), as_count(slice, kOp), MPI_DOUBLE, MPI_COMM_WORLD);
    std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(values.size()), values.begin());
}

void all_reduce(Tensor& tensor, ReduceOp op) {
    if (!tensor.defined()) fail("distributed.all_reduce", "the tensor is undefined");
    Array values = tensor.value();
    all_reduce(values, op);
    std::copy(values.begin(), values.end(), tensor.mutable_value().begin());
}

std::vector<Array> all_gather(const Array& values) {
    constexpr const char* kOp = "distributed.all_gather";
    require_init(kOp);
    const std::vector<Shape> shapes = gather_shapes(shape_of(values), kOp);
    const int world = world_size();
    std::vector<int> counts(static_cast<std::size_t>(world)), displs(static_cast<std::size_t>(world), 0);
    for (int r = 0; r < world; ++r) {
        std::size_t n = 1;
        for (std::size_t extent : shapes[r]) n *= extent;
        counts[r] = as_count(n, kOp);
        if (r > 0) displs[r] = displs[r - 1] + counts[r - 1];
    }
    const Array contiguous = values;  // row-major copy (values may be a view's result)
    std::vector<double> all(static_cast<std::size_t>(displs.back() + counts.back()));
    g_bytes_sent += values.size() * sizeof(double);
    MPI_Allgatherv(contiguous.data(), counts[rank()], MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
                   MPI_COMM_WORLD);
    std::vector<Array> out;
    for (int r = 0; r < world; ++r) {
        Array a = Array::from_shape(shapes[r]);
        std::copy(all.begin() + displs[r], all.begin() + displs[r] + counts[r], a.begin());
        out.push_back(std::move(a));
    }
    return out;
}

std::vector<Array> all_gather(const Tensor& tensor) {
    if (!tensor.defined()) fail("distributed.all_gather", "the tensor is undefined");
    return all_gather(tensor.value());
}

Array all_gather_rows(const Array& values) {
    constexpr const char* kOp = "distributed.all_gather_rows";
    if (values.dimension() == 0) fail(kOp, "needs arrays of at least one axis, got a 0-D array");
    std::vector<Array> parts = all_gather(values);
    Shape shape = shape_of(parts[0]);
    shape[0] = 0;
    for (const Array& p : parts) {
        Shape rest = shape_of(p), first_rest = shape_of(parts[0]);
        rest[0] = first_rest[0] = 0;
        if (p.dimension() != parts[0].dimension() || rest != first_rest) {
            std::vector<Shape> shapes;
            for (const Array& q : parts) shapes.push_back(shape_of(q));
            fail(kOp, fmt::format("the ranks' arrays must agree on every axis but the first, got {}", shapes_str(shapes)));
        }
        shape[0] += p.shape()[0];
    }
    Array out = Array::from_shape(shape);
    auto it = out.begin();
    for (const Array& p : parts) it = std::copy(p.begin(), p.end(), it);
    return out;
}

void broadcast(Array& values, int src) {
    constexpr const char* kOp = "distributed.broadcast";
    require_init(kOp);
    if (src < 0 || src >= world_size()) fail(kOp, fmt::format("src {} is not a rank of a job of {}", src, world_size()));
    require_same_shape(shape_of(values), kOp);
    if (rank() == src) g_bytes_sent += values.size() * sizeof(double);
    Array contiguous = values;
    MPI_Bcast(contiguous.data(), as_count(contiguous.size(), kOp), MPI_DOUBLE, src, MPI_COMM_WORLD);
    values = std::move(contiguous);
}

void broadcast(Tensor& tensor, int src) {
    if (!tensor.defined()) fail("distributed.broadcast", "the tensor is undefined");
    Array values = tensor.value();
    broadcast(values, src);
    std::copy(values.begin(), values.end(), tensor.mutable_value().begin());
}

std::string broadcast_string(const std::string& text, int src) {
    constexpr const char* kOp = "distributed.broadcast_string";
    require_init(kOp);
    int length = as_count(text.size(), kOp);
    MPI_Bcast(&length, 1, MPI_INT, src, MPI_COMM_WORLD);
    std::string out = rank() == src ? text : std::string(static_cast<std::size_t>(length), '\0');
    MPI_Bcast(out.data(), length, MPI_CHAR, src, MPI_COMM_WORLD);
    return out;
}

void abort(const std::string& message, int code) {
    const int r = mpi_running() ? rank() : 0;
    std::cerr << fmt::format("rank {}: {}\n", r, message) << std::flush;
    if (mpi_running()) MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
}

std::uint64_t bytes_sent() { return g_bytes_sent; }

void reset_bytes_sent() { g_bytes_sent = 0; }

}  // namespace xg::distributed
