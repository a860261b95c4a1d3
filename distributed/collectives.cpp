// The collectives of distributed/collectives.hpp over Open MPI's C API. Only this file includes mpi.h.
#include "distributed/collectives.hpp"

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

// The ring all-reduce's chunks and steps, as rank `me` of `world` sees them (reduce_in_place).
// Step s = 0 .. world - 2 reduce-scatters, s = world - 1 .. 2 world - 3 all-gathers.
struct Ring {
    std::size_t n;
    int world, me;
    int chunk(int c) const { return ((c % world) + world) % world; }
    std::size_t begin_of(int c) const { return chunk_begin(n, world, chunk(c)); }
    std::size_t size_of(int c) const { return chunk_begin(n, world, chunk(c) + 1) - begin_of(c); }
    int right() const { return (me + 1) % world; }
    int left() const { return (me + world - 1) % world; }
    int steps() const { return 2 * (world - 1); }
    bool reduces(int step) const { return step < world - 1; }
    int send_chunk(int step) const { return reduces(step) ? me - step : me + 1 - (step - (world - 1)); }
    int receive_chunk(int step) const { return reduces(step) ? me - step - 1 : me - (step - (world - 1)); }
    std::size_t largest_chunk() const { return chunk_begin(n, world, world) - chunk_begin(n, world, world - 1); }
};

bool exchanges(std::size_t n, int world) { return n * sizeof(double) * static_cast<std::size_t>(world - 1) <= kExchangeBytes; }

// After the exchange's all-gather of every rank's n values into `received` (rank order): their
// combination in rank order into `data`, divided for AVG. `received` is scratch.
void finish_exchange(double* received, double* data, std::size_t n, int world, ReduceOp op) {
    // the running result moves through the ranks' copies: x_r becomes (... + x_{r-1}) + x_r
    for (int r = 1; r < world; ++r) {
        combine(received + static_cast<std::size_t>(r - 1) * n, received + static_cast<std::size_t>(r) * n, n, op);
    }
    std::copy(received + static_cast<std::size_t>(world - 1) * n, received + static_cast<std::size_t>(world) * n, data);
    if (op == ReduceOp::AVG) {
        for (std::size_t i = 0; i < n; ++i) data[i] /= static_cast<double>(world);
    }
}

// After ring step `step` received chunk `receive_chunk(step)` into `received`: its part of the sum,
// and after the last reduce-scatter step, AVG's division of the chunk this rank finished.
void finish_ring_step(const Ring& ring, int step, const double* received, double* data, ReduceOp op) {
    if (!ring.reduces(step)) return;  // an all-gather step received straight into data
    const int chunk = ring.receive_chunk(step);
    combine(received, data + ring.begin_of(chunk), ring.size_of(chunk), op);
    if (op == ReduceOp::AVG && step == ring.world - 2) {
        double* values = data + ring.begin_of(ring.me + 1);
        const double ranks = static_cast<double>(ring.world);
        for (std::size_t i = 0; i < ring.size_of(ring.me + 1); ++i) values[i] /= ranks;
    }
}

// Reduces n doubles over the ranks in place, one step at a time over MPI's nonblocking
// point-to-point calls (docs/distributed.md, "Determinism"). Every value is reduced in one fixed
// order, on one rank or identically on all, so every rank gets the same bits, every run, on any MPI.
//
// Small payloads (n 8 (world - 1) <= kExchangeBytes), where the cost is the number of messages:
// one exchange (every rank's values to every rank, as MPI_Allgather), after which every rank
// combines the ranks' values in rank order, ((x_0 + x_1) + x_2) + ... + x_{world-1}.
//
// Larger ones: a ring all-reduce, the algorithm Open MPI and NCCL use for large messages, written
// out so that its order of operations is ours, not a library's choice. The values are cut into
// `world` chunks, chunk c = [n c / world, n (c + 1) / world). Reduce-scatter: in step
// s = 0 .. world - 2, rank r sends chunk (r - s) to rank r + 1 and adds the chunk (r - s - 1) it
// receives from rank r - 1 into its own values, so chunk c is summed along the ring from rank c,
// (((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c-1}), on rank c - 1 alone, which then divides it for
// AVG. All-gather: world - 1 more steps hand each finished chunk around.
//
// One mechanism for both callers: all_reduce starts a reduction and waits for it; a Bucket starts
// one and lets DistributedDataParallel's hooks move it on (test) while backward runs. A reduction
// makes no collective call, so one in flight cannot be matched with a collective that another
// rank reached first (a SyncBatchNorm's); its messages carry its own two tags. The scratch and the
// requests are kept between calls (no allocation per all-reduce).
struct Reduction {
    bool active = false;  // started and not finished
    bool posted = false;  // the current step's requests are out
    bool exchange = false;
    ReduceOp op = ReduceOp::SUM;
    Ring ring{0, 1, 0};
    int step = 0;
    int tag = 0;  // the exchange's and the reduce-scatter's; the all-gather's is tag + 1
    double* data = nullptr;
    std::vector<double> received;
    std::vector<MPI_Request> requests;

    // Starts reducing the n values at `values` and posts the first step; the values must be
    // neither read nor written until test() returns true or wait() returns.
    void start(double* values, std::size_t n, ReduceOp how, int first_tag, const char* name) {
        const int world = world_size();
        g_bytes_sent += n * sizeof(double);
        if (world == 1 || n == 0) return;
        exchange = exchanges(n, world);
        op = how;
        ring = Ring{n, world, rank()};
        step = 0;
        tag = first_tag;
        data = values;
        const std::size_t scratch = exchange ? n * static_cast<std::size_t>(world) : ring.largest_chunk();
        if (received.size() < scratch) received.resize(scratch);
        requests.assign(exchange ? 2 * static_cast<std::size_t>(world - 1) : 2, MPI_REQUEST_NULL);
        active = true;
        posted = false;
        test(name);
    }

    // Moves the reduction on without blocking: finishes the steps whose messages have arrived and
    // posts the next. True once the last step has finished (or when none was started).
    bool test(const char* name) {
        if (!active) return true;
        const std::size_t n = ring.n;
        const int steps = exchange ? 1 : ring.steps();
        while (true) {
            if (posted) {
                int done = 0;
                MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
                if (!done) return false;
                posted = false;
                if (exchange) finish_exchange(received.data(), data, n, ring.world, op);
                else finish_ring_step(ring, step, received.data(), data, op);
                if (++step == steps) {
                    active = false;
                    return true;
                }
            }
            if (exchange) {
                const int me = ring.me;
                std::copy(data, data + n, received.data() + static_cast<std::size_t>(me) * n);
                MPI_Request* request = requests.data();
                for (int r = 0; r < ring.world; ++r) {
                    if (r == me) continue;
                    MPI_Irecv(received.data() + static_cast<std::size_t>(r) * n, as_count(n, name), MPI_DOUBLE, r, tag, MPI_COMM_WORLD,
                              request++);
                    MPI_Isend(data, as_count(n, name), MPI_DOUBLE, r, tag, MPI_COMM_WORLD, request++);
                }
            } else {
                const int send = ring.send_chunk(step), receive = ring.receive_chunk(step);
                double* into = ring.reduces(step) ? received.data() : data + ring.begin_of(receive);
                const int step_tag = tag + (ring.reduces(step) ? 0 : 1);
                MPI_Irecv(into, as_count(ring.size_of(receive), name), MPI_DOUBLE, ring.left(), step_tag, MPI_COMM_WORLD, &requests[0]);
                MPI_Isend(data + ring.begin_of(send), as_count(ring.size_of(send), name), MPI_DOUBLE, ring.right(), step_tag,
                          MPI_COMM_WORLD, &requests[1]);
            }
            posted = true;
        }
    }

    // Finishes the reduction (nothing when none is in flight).
    void wait(const char* name) {
        while (!test(name)) MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
    }
};

// all_reduce's tags; each Bucket has two of its own above them.
constexpr int kBlockingTag = 0;

// Reduces n doubles over the ranks in place and returns when done, with no check (the callers have
// made sure every rank passes the same n).
void reduce_in_place(double* data, std::size_t n, ReduceOp op, const char* name) {
    static Reduction reduction;
    reduction.start(data, n, op, kBlockingTag, name);
    reduction.wait(name);
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

namespace {
// Runs `collective` on a tensor's values in its own storage: a float32 tensor's are widened into a
// scratch array and stored back with one rounding each (the bits of a float64 mirror written back),
// so the tensor keeps no mirror.
template <class Collective>
void through_float64_scratch(Tensor& tensor, const Collective& collective) {
    if (tensor.dtype() != Dtype::Float32) return collective(tensor.mutable_values<double>());
    FloatArray& stored = tensor.mutable_values<float>();
    Array wide = to_float64_array(stored);
    collective(wide);
    for (std::size_t i = 0; i < stored.size(); ++i) stored.data()[i] = static_cast<float>(wide.data()[i]);
}
}  // namespace

void all_reduce(Tensor& tensor, ReduceOp op) {
    if (!tensor.defined()) fail("distributed.all_reduce", "the tensor is undefined");
    through_float64_scratch(tensor, [op](Array& values) { all_reduce(values, op); });
}

namespace {
// Each bucket's messages get their own two tags (all_reduce's are 0 and 1), so that buckets in
// flight together never take each other's messages. Buckets are made in the same order on every
// rank (the constructor is a collective), so the counter agrees between ranks.
int g_buckets_made = 0;
constexpr int kBucketTags = 16000;  // MPI guarantees tags up to 32767
}  // namespace

Bucket::Bucket(std::size_t size, const std::string& layout) {
    constexpr const char* kOp = "distributed.Bucket";
    require_init(kOp);
    as_count(size, kOp);
    require_same_layout(fmt::format("{} values ({})", size, layout), kOp, "bucket layout");
    values_.assign(size, 0.0);
    tag_ = kBlockingTag + 2 + 2 * (g_buckets_made++ % kBucketTags);
}

// A bucket's reduction (started or not), kept between all-reduces.
struct Bucket::Transfer {
    Reduction reduction;
};

Bucket::Bucket(Bucket&&) noexcept = default;
Bucket& Bucket::operator=(Bucket&&) noexcept = default;
Bucket::~Bucket() {
    if (in_flight() && mpi_running()) wait();
}

bool Bucket::in_flight() const { return transfer_ && transfer_->reduction.active; }

void Bucket::all_reduce(ReduceOp op) {
    constexpr const char* kOp = "distributed.Bucket.all_reduce";
    if (in_flight()) fail(kOp, "this bucket's start_all_reduce() has not finished: call wait() first");
    start_all_reduce(op);
    wait();
}

void Bucket::start_all_reduce(ReduceOp op) {
    constexpr const char* kOp = "distributed.Bucket.start_all_reduce";
    if (in_flight()) fail(kOp, "this bucket's previous all-reduce has not finished: call wait() first");
    if (!transfer_) transfer_ = std::make_unique<Transfer>();
    transfer_->reduction.start(values_.data(), values_.size(), op, tag_, kOp);
}

bool Bucket::test() { return !transfer_ || transfer_->reduction.test("distributed.Bucket.test"); }

void Bucket::wait() {
    if (transfer_) transfer_->reduction.wait("distributed.Bucket.wait");
}

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
    // a float32 tensor's values travel widened (exactly) from a scratch copy: no float64 mirror
    if (tensor.dtype() == Dtype::Float32) return all_gather(to_float64_array(tensor.values<float>()));
    return all_gather(tensor.values<double>());
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
    through_float64_scratch(tensor, [src](Array& values) { broadcast(values, src); });
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
