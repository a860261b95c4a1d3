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

// The shapes of every rank, in rank order: one all-gather of a fixed-size record (the number of
// axes and up to kRecordAxes extents), a second one only when some rank has more axes.
std::vector<Shape> gather_shapes(const Shape& shape, const char* op) {
    constexpr std::size_t kRecordAxes = 7, kRecord = kRecordAxes + 1;
    const std::size_t world = static_cast<std::size_t>(world_size());
    std::uint64_t mine[kRecord] = {shape.size()};
    std::copy(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(std::min(shape.size(), kRecordAxes)), mine + 1);
    std::vector<std::uint64_t> records(kRecord * world);
    MPI_Allgather(mine, static_cast<int>(kRecord), MPI_UINT64_T, records.data(), static_cast<int>(kRecord), MPI_UINT64_T, MPI_COMM_WORLD);
    std::vector<Shape> shapes(world);
    std::vector<int> ndims(world), displs(world, 0);
    bool all_fit = true;
    for (std::size_t r = 0; r < world; ++r) {
        const std::uint64_t* record = records.data() + r * kRecord;
        ndims[r] = as_count(record[0], op);
        if (r > 0) displs[r] = displs[r - 1] + ndims[r - 1];
        if (record[0] > kRecordAxes) all_fit = false;
        else shapes[r].assign(record + 1, record + 1 + record[0]);
    }
    if (all_fit) return shapes;
    const std::vector<std::uint64_t> extents(shape.begin(), shape.end());
    std::vector<std::uint64_t> all(static_cast<std::size_t>(displs.back() + ndims.back()));
    MPI_Allgatherv(extents.data(), ndims[static_cast<std::size_t>(rank())], MPI_UINT64_T, all.data(), ndims.data(), displs.data(),
                   MPI_UINT64_T, MPI_COMM_WORLD);
    for (std::size_t r = 0; r < world; ++r) shapes[r].assign(all.begin() + displs[r], all.begin() + displs[r] + ndims[r]);
    return shapes;
}

std::string shapes_str(const std::vector<Shape>& shapes) {
    std::string s;
    for (std::size_t r = 0; r < shapes.size(); ++r) s += fmt::format("{}rank {}: {}", r ? ", " : "", r, shape_str(shapes[r]));
    return s;
}

// Every rank's `text`, in rank order (to word an error).
std::vector<std::string> gather_strings(const std::string& text, const char* op) {
    const int world = world_size();
    const int length = as_count(text.size(), op);
    std::vector<int> lengths(static_cast<std::size_t>(world)), displs(static_cast<std::size_t>(world), 0);
    MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
    for (int r = 1; r < world; ++r) displs[r] = displs[r - 1] + lengths[r - 1];
    std::string all(static_cast<std::size_t>(displs.back() + lengths.back()), '\0');
    MPI_Allgatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), displs.data(), MPI_CHAR, MPI_COMM_WORLD);
    std::vector<std::string> texts;
    for (int r = 0; r < world; ++r) texts.push_back(all.substr(static_cast<std::size_t>(displs[r]), static_cast<std::size_t>(lengths[r])));
    return texts;
}

// Throws on every rank (never on some only, which would leave the others waiting) when the ranks'
// `layout` strings differ, naming each rank's. One small all_reduce of a fingerprint (FNV-1a);
// the strings themselves are gathered only to word the error.
void require_same_layout(const std::string& layout, const char* op, const char* what) {
    std::uint64_t fingerprint = 14695981039346656037ull;
    for (const char c : layout) fingerprint = (fingerprint ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    // the largest fingerprint and the largest complement: equal fingerprints iff max == ~max(~f)
    std::uint64_t bounds[2] = {fingerprint, ~fingerprint};
    MPI_Allreduce(MPI_IN_PLACE, bounds, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    if (bounds[0] == ~bounds[1]) return;
    const std::vector<std::string> layouts = gather_strings(layout, op);
    std::string s;
    for (std::size_t r = 0; r < layouts.size(); ++r) s += fmt::format("{}rank {}: {}", r ? ", " : "", r, layouts[r]);
    fail(op, fmt::format("every rank must pass the same {}, got {}", what, s));
}

void require_same_shape(const Shape& shape, const char* op) { require_same_layout(shape_str(shape), op, "shape"); }

// The first value of chunk c when n values are cut into `world` chunks.
std::size_t chunk_begin(std::size_t n, int world, int c) {
    return n * static_cast<std::size_t>(c) / static_cast<std::size_t>(world);
}

// into[i] = op(from[i], into[i]): `from` holds the partial result of the ranks before this one.
void combine(const double* from, double* into, std::size_t n, ReduceOp op) {
    switch (op) {
        case ReduceOp::MAX:
            for (std::size_t i = 0; i < n; ++i) into[i] = from[i] > into[i] ? from[i] : into[i];
            break;
        case ReduceOp::MIN:
            for (std::size_t i = 0; i < n; ++i) into[i] = from[i] < into[i] ? from[i] : into[i];
            break;
        default:  // SUM, and AVG before its division
            for (std::size_t i = 0; i < n; ++i) into[i] = from[i] + into[i];
    }
}

// Reduces n doubles over the ranks in place, with no check (the callers have made sure every rank
// passes the same n); docs/distributed.md, "Determinism". Every value is reduced in one fixed
// order, on one rank or identically on all, so every rank gets the same bits, every run, on any MPI.
//
// Small payloads (n 8 (world - 1) <= kExchangeBytes), where the cost is the number of messages:
// one MPI_Allgather, after which every rank combines the ranks' values in rank order,
// ((x_0 + x_1) + x_2) + ... + x_{world-1}.
//
// Larger ones: a ring all-reduce over MPI_Sendrecv, the algorithm Open MPI and NCCL use for large
// messages, written out so that its order of operations is ours, not a library's choice. The
// values are cut into `world` chunks, chunk c = [n c / world, n (c + 1) / world). Reduce-scatter:
// in step s = 0 .. world - 2, rank r sends chunk (r - s) to rank r + 1 and adds the chunk
// (r - s - 1) it receives from rank r - 1 into its own values, so chunk c is summed along the
// ring from rank c, (((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c-1}), on rank c - 1 alone, which
// then divides it for AVG. All-gather: world - 1 more steps hand each finished chunk around.
//
// The scratch buffer (one chunk, or every rank's small payload) is kept between calls.
void reduce_in_place(double* data, std::size_t n, ReduceOp op, const char* name) {
    const int world = world_size();
    g_bytes_sent += n * sizeof(double);
    if (world == 1 || n == 0) return;
    static std::vector<double> received;
    if (n * sizeof(double) * static_cast<std::size_t>(world - 1) <= kExchangeBytes) {
        if (received.size() < n * static_cast<std::size_t>(world)) received.resize(n * static_cast<std::size_t>(world));
        MPI_Allgather(data, as_count(n, name), MPI_DOUBLE, received.data(), as_count(n, name), MPI_DOUBLE, MPI_COMM_WORLD);
        // the running result moves through the ranks' copies: x_r becomes (... + x_{r-1}) + x_r
        for (int r = 1; r < world; ++r) {
            combine(received.data() + static_cast<std::size_t>(r - 1) * n, received.data() + static_cast<std::size_t>(r) * n, n, op);
        }
        std::copy(received.data() + static_cast<std::size_t>(world - 1) * n, received.data() + static_cast<std::size_t>(world) * n, data);
        if (op == ReduceOp::AVG) {
            for (std::size_t i = 0; i < n; ++i) data[i] /= static_cast<double>(world);
        }
        return;
    }
    const std::size_t largest_chunk = chunk_begin(n, world, world) - chunk_begin(n, world, world - 1);
    if (received.size() < largest_chunk) received.resize(largest_chunk);
    const int me = rank(), right = (me + 1) % world, left = (me + world - 1) % world;
    auto chunk = [world](int c) { return ((c % world) + world) % world; };
    auto begin_of = [&](int c) { return chunk_begin(n, world, chunk(c)); };
    auto size_of = [&](int c) { return as_count(chunk_begin(n, world, chunk(c) + 1) - chunk_begin(n, world, chunk(c)), name); };
    for (int step = 0; step + 1 < world; ++step) {
        const int send = me - step, receive = me - step - 1;
        MPI_Sendrecv(data + begin_of(send), size_of(send), MPI_DOUBLE, right, 0, received.data(), size_of(receive),
                     MPI_DOUBLE, left, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        combine(received.data(), data + begin_of(receive), static_cast<std::size_t>(size_of(receive)), op);
    }
    if (op == ReduceOp::AVG) {
        const int owned = me + 1;
        double* values = data + begin_of(owned);
        const double ranks = static_cast<double>(world);
        for (int i = 0; i < size_of(owned); ++i) values[i] /= ranks;
    }
    for (int step = 0; step + 1 < world; ++step) {
        const int send = me + 1 - step, receive = me - step;
        MPI_Sendrecv(data + begin_of(send), size_of(send), MPI_DOUBLE, right, 1, data + begin_of(receive), size_of(receive),
                     MPI_DOUBLE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
}

// Rank src's n doubles to every rank, in place, with no check.
void broadcast_in_place(double* data, std::size_t n, int src, const char* name) {
    if (rank() == src) g_bytes_sent += n * sizeof(double);
    MPI_Bcast(data, as_count(n, name), MPI_DOUBLE, src, MPI_COMM_WORLD);
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
    reduce_in_place(values.data(), values.size(), op, kOp);
}

void all_reduce(Tensor& tensor, ReduceOp op) {
    if (!tensor.defined()) fail("distributed.all_reduce", "the tensor is undefined");
    all_reduce(tensor.mutable_value(), op);
}

Bucket::Bucket(std::size_t size, const std::string& layout) {
    constexpr const char* kOp = "distributed.Bucket";
    require_init(kOp);
    as_count(size, kOp);
    require_same_layout(fmt::format("{} values ({})", size, layout), kOp, "bucket layout");
    values_.assign(size, 0.0);
}

void Bucket::all_reduce(ReduceOp op) { reduce_in_place(values_.data(), values_.size(), op, "distributed.Bucket.all_reduce"); }

void Bucket::broadcast(int src) {
    constexpr const char* kOp = "distributed.Bucket.broadcast";
    if (src < 0 || src >= world_size()) fail(kOp, fmt::format("src {} is not a rank of a job of {}", src, world_size()));
    broadcast_in_place(values_.data(), values_.size(), src, kOp);
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
    std::vector<double> all(static_cast<std::size_t>(displs.back() + counts.back()));
    g_bytes_sent += values.size() * sizeof(double);
    MPI_Allgatherv(values.data(), counts[rank()], MPI_DOUBLE, all.data(), counts.data(), displs.data(), MPI_DOUBLE,
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
    broadcast_in_place(values.data(), values.size(), src, kOp);
}

void broadcast(Tensor& tensor, int src) {
    if (!tensor.defined()) fail("distributed.broadcast", "the tensor is undefined");
    broadcast(tensor.mutable_value(), src);
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
