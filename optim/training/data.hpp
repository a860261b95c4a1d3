// Datasets and mini-batches: an in-memory TensorDataset, a DataLoader with deterministic seeded
// shuffling (re-shuffled every epoch, resumable mid-epoch from its state_dict) and the
// Fashion-MNIST loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/engine/arg.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "core/engine/random.hpp"

namespace xg::optim {

/// A mini-batch: inputs (batch, ...) as a leaf tensor (no gradient), and the integer labels y of
/// a classification dataset or the float targets of a regression one.
struct Batch {
    /// Inputs (batch, ...), no gradient.
    Tensor x;
    /// Labels (batch) of a dataset built with integer labels; empty for float targets.
    IndexArray y;
    /// Float targets (batch, ...) of a dataset built with them (no gradient); undefined for labels.
    Tensor target;
};

/// Samples held in memory, like torch's TensorDataset: features (N, ...) with either integer
/// labels (N) for classification or float targets (N, ...) for regression.
class TensorDataset {
public:
    TensorDataset() = default;
    /// features (N, ...) and class labels (N); throws xg::Error naming both shapes when they
    /// disagree or features is 0-D. Labels held as doubles go through xg::to_indices first,
    /// which rejects a value that is not a whole number.
    TensorDataset(Array features, IndexArray labels);
    /// features (N, ...) and float targets (N, ...) (e.g. regression; batches carry them in
    /// Batch::target, and Batch::y stays empty): values are kept exactly, never rounded to labels.
    /// Throws xg::Error naming both shapes when the leading extents differ or either is 0-D.
    TensorDataset(Array features, Array targets);
    /// float32 features (N, ...) held natively (half the memory of float64) and class labels (N):
    /// batches are float32 tensors, gathered without widening. Errors as above.
    TensorDataset(FloatArray features, IndexArray labels);

    /// The features' dtype: kFloat32 for a dataset built from a FloatArray, else kFloat64.
    Dtype dtype() const { return float32_ ? Dtype::Float32 : Dtype::Float64; }
    /// This dataset with its features in `dtype` (itself, copied, when it already is): float32 rounds
    /// each value to nearest, as Tensor::to. Float targets stay float64 (only labelled datasets convert).
    TensorDataset to(Dtype dtype) const;

    /// Number of samples N.
    std::size_t size() const { return size_; }
    /// Shape of one sample (features' shape without the leading N).
    Shape sample_shape() const;
    /// All features (N, ...) of a float64 dataset; throws xg::Error for a float32 one (read
    /// features32(): a float64 copy would double its memory).
    const Array& features() const;
    /// All features (N, ...) of a float32 dataset; throws xg::Error for a float64 one.
    const FloatArray& features32() const;
    /// All labels (N); empty for a dataset of float targets.
    const IndexArray& labels() const { return labels_; }
    /// True for a dataset of float targets (built from an Array), false for integer labels.
    bool has_float_targets() const { return has_targets_; }
    /// All float targets (N, ...); empty for a dataset of labels.
    const Array& targets() const { return targets_; }
    /// Samples [start, start + count) as a new dataset (e.g. a quick run on the first 10000).
    /// Throws xg::Error naming the argument for a negative start or count, or a range past the end.
    TensorDataset subset(std::int64_t start, std::int64_t count) const;
    /// The samples at `indices`, in that order, as one batch.
    Batch batch(const std::vector<std::size_t>& indices) const;

private:
    template <class T>
    Batch gather(const xt::xarray<T>& features, const std::vector<std::size_t>& indices) const;

    Array features_;
    FloatArray features32_;  // a float32 dataset's features (features_ is then empty)
    bool float32_ = false;
    IndexArray labels_;
    Array targets_;
    bool has_targets_ = false;
    std::size_t size_ = 0;
    std::size_t sample_size_ = 0;  // elements per sample
    std::size_t target_size_ = 0;  // elements per float target
};

/// Options of DataLoader, e.g. `DataLoaderOptions(128).shuffle(true).seed(42)`.
class DataLoaderOptions {
public:
    /// Batches of `batch_size`, in order, keeping the last partial batch.
    explicit DataLoaderOptions(std::int64_t batch_size) : batch_size_(batch_size) {}
    /// Samples per batch (positive; DataLoader rejects 0 and negative values, naming batch_size).
    XG_ARG(DataLoaderOptions, std::int64_t, batch_size, 1);
    /// Draw a new random order every epoch (default false: dataset order).
    XG_ARG(DataLoaderOptions, bool, shuffle, false);
    /// Seed of the loader's own shuffling generator.
    XG_ARG(DataLoaderOptions, std::uint64_t, seed, 0);
    /// Skip the last batch when it is smaller than batch_size.
    XG_ARG(DataLoaderOptions, bool, drop_last, false);
};

/// Iterates a dataset in mini-batches: `for (const Batch& b : loader) { ... }` is one epoch.
/// Each epoch that starts draws a new order from the loader's own generator (seeded by
/// `seed`), so runs are reproducible and independent of xg::default_generator(). The last
/// batch is smaller unless drop_last. The loader refers to the dataset, which must outlive it.
class DataLoader {
    struct Epoch;  // one epoch's order and progress, owned by the iterators that walk it

public:
    /// Throws xg::Error for a batch_size below 1 or an empty dataset.
    DataLoader(const TensorDataset& dataset, const DataLoaderOptions& options);
    /// The same with the options spelled out.
    DataLoader(const TensorDataset& dataset, std::int64_t batch_size, bool shuffle = false, std::uint64_t seed = 0,
               bool drop_last = false);
    // The loader keeps a reference: a temporary dataset would dangle, so it does not compile.
    DataLoader(TensorDataset&&, const DataLoaderOptions&) = delete;
    DataLoader(TensorDataset&&, std::int64_t, bool = false, std::uint64_t = 0, bool = false) = delete;

    /// Batches per epoch.
    std::size_t size() const;
    /// The dataset iterated.
    const TensorDataset& dataset() const { return dataset_; }
    /// The options given at construction.
    const DataLoaderOptions& options() const { return options_; }
    /// Epochs started so far.
    std::int64_t epoch() const { return epoch_; }

    /// Input iterator over one epoch's batches (from begin()); valid while the loader lives.
    class iterator {
    public:
        /// Single pass: each batch is produced once.
        using iterator_category = std::input_iterator_tag;
        /// What *it gives.
        using value_type = Batch;
        /// Standard iterator member type.
        using difference_type = std::ptrdiff_t;
        /// Standard iterator member type.
        using pointer = const Batch*;
        /// Standard iterator member type.
        using reference = const Batch&;

        /// The current batch.
        const Batch& operator*() const { return batch_; }
        /// Member access to the current batch.
        const Batch* operator->() const { return &batch_; }
        /// Fetches the next batch (becomes end() after the last).
        iterator& operator++();
        /// True when both are end() or both walk the same epoch.
        bool operator==(const iterator& other) const { return epoch_ == other.epoch_; }
        /// Negation of ==.
        bool operator!=(const iterator& other) const { return !(*this == other); }

    private:
        friend class DataLoader;
        iterator(const DataLoader* loader, std::shared_ptr<Epoch> epoch);  // a null epoch is the end
        const DataLoader* loader_ = nullptr;
        std::shared_ptr<Epoch> epoch_;
        Batch batch_;
    };

    /// Starts the next epoch (or continues the epoch a load_state_dict left unfinished). Each
    /// begin() gets its own order and position, so loops over the same loader may nest: an
    /// inner loop runs whole epochs of its own and the outer one still sees all its batches.
    /// state_dict() describes the epoch begun last.
    iterator begin();
    /// The end of the epoch.
    iterator end() { return iterator(this, nullptr); }

    /// {"generator": the generator state before the last begun epoch's shuffle (bytes as doubles),
    ///  "epoch", "position": batches handed out in this epoch}. Saved inside an epoch, the
    /// restored loader continues with the next batch of that same order.
    NamedArrays state_dict() const;
    /// Checks a state_dict() against this loader and throws xg::Error naming the first problem (wrong
    /// keys, non-integer values, a position past this loader's epoch); changes nothing.
    void validate_state_dict(const NamedArrays& state) const;
    /// Validates, then restores the shuffle order and position: the next begin() continues there.
    void load_state_dict(const NamedArrays& state);

private:
    void start_epoch();
    bool fetch(Batch& out, Epoch& epoch) const;  // the epoch's next batch, false when it is over

    const TensorDataset& dataset_;
    DataLoaderOptions options_;
    Generator generator_;
    std::string epoch_start_state_;  // generator state before the last begun epoch's shuffle
    std::shared_ptr<Epoch> current_;  // the epoch begun last (shared with its iterators)
    std::int64_t epoch_ = 0;
    bool resume_pending_ = false;
};

/// A string as an array of its bytes (one double each), for storing text in .npz files.
Array bytes_to_array(const std::string& bytes);
/// The inverse of bytes_to_array; throws naming `what` if an element is not a byte value.
std::string array_to_bytes(const Array& a, const std::string& what);

/// Fashion-MNIST (or MNIST) from `dir`: split "train" (60000) or "test" (10000). Features are
/// (N, 784) pixel/255 in [0, 1], labels 0..9, in `dtype`: float32 holds the features natively (each
/// pixel/255 rounded to nearest, the values of a float64 one converted), 188 MB instead of 376 MB
/// for the training set. Reads `<prefix>-images-idx3-ubyte[.gz]` and
/// `<prefix>-labels-idx1-ubyte[.gz]` with prefix "train" / "t10k". A missing, truncated or
/// inconsistent file throws xg::Error naming the file.
TensorDataset load_fashion_mnist(const std::string& split, const std::string& dir = "/usr/share/datasets/fashion-mnist",
                                 Dtype dtype = Dtype::Float64);

}  // namespace xg::optim
