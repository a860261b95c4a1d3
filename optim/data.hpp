// Datasets and mini-batches: an in-memory TensorDataset, a DataLoader with deterministic seeded
// shuffling (re-shuffled every epoch, resumable mid-epoch from its state_dict) and the
// Fashion-MNIST loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "core/ops.hpp"
#include "core/random.hpp"
#include "optim/optimizer.hpp"

namespace xg::optim {

/// A mini-batch: inputs (batch, ...) as a leaf tensor (no gradient) and integer labels (batch).
struct Batch {
    Tensor x;
    IndexArray y;
};

/// Samples held in memory: features (N, ...) and labels (N), like torch's TensorDataset.
class TensorDataset {
public:
    TensorDataset() = default;
    TensorDataset(Array features, IndexArray labels);

    std::size_t size() const { return labels_.size(); }
    /// Shape of one sample (features' shape without the leading N).
    Shape sample_shape() const;
    const Array& features() const { return features_; }
    const IndexArray& labels() const { return labels_; }
    /// Samples [start, start + count) as a new dataset (e.g. a quick run on the first 10000).
    TensorDataset subset(std::size_t start, std::size_t count) const;
    /// The samples at `indices`, in that order, as one batch.
    Batch batch(const std::vector<std::size_t>& indices) const;

private:
    Array features_;
    IndexArray labels_;
    std::size_t sample_size_ = 0;  // elements per sample
};

/// Options of DataLoader, e.g. `DataLoaderOptions(128).shuffle(true).seed(42)`.
class DataLoaderOptions {
public:
    explicit DataLoaderOptions(std::size_t batch_size) : batch_size_(batch_size) {}
    XG_OPTIM_ARG(DataLoaderOptions, std::size_t, batch_size, 1);
    XG_OPTIM_ARG(DataLoaderOptions, bool, shuffle, false);
    XG_OPTIM_ARG(DataLoaderOptions, std::uint64_t, seed, 0);
    XG_OPTIM_ARG(DataLoaderOptions, bool, drop_last, false);
};

/// Iterates a dataset in mini-batches: `for (const Batch& b : loader) { ... }` is one epoch.
/// Each epoch that starts draws a new order from the loader's own generator (seeded by
/// `seed`), so runs are reproducible and independent of xg::default_generator(). The last
/// batch is smaller unless drop_last. The loader refers to the dataset, which must outlive it.
class DataLoader {
public:
    DataLoader(const TensorDataset& dataset, const DataLoaderOptions& options);
    DataLoader(const TensorDataset& dataset, std::size_t batch_size, bool shuffle = false, std::uint64_t seed = 0,
               bool drop_last = false);
    // The loader keeps a reference: a temporary dataset would dangle, so it does not compile.
    DataLoader(TensorDataset&&, const DataLoaderOptions&) = delete;
    DataLoader(TensorDataset&&, std::size_t, bool = false, std::uint64_t = 0, bool = false) = delete;

    /// Batches per epoch.
    std::size_t size() const;
    const TensorDataset& dataset() const { return dataset_; }
    const DataLoaderOptions& options() const { return options_; }
    /// Epochs started so far.
    std::int64_t epoch() const { return epoch_; }

    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = Batch;
        using difference_type = std::ptrdiff_t;
        using pointer = const Batch*;
        using reference = const Batch&;

        const Batch& operator*() const { return batch_; }
        const Batch* operator->() const { return &batch_; }
        iterator& operator++();
        bool operator==(const iterator& other) const { return loader_ == other.loader_; }
        bool operator!=(const iterator& other) const { return !(*this == other); }

    private:
        friend class DataLoader;
        explicit iterator(DataLoader* loader);  // nullptr is the end
        DataLoader* loader_ = nullptr;
        Batch batch_;
    };

    /// Starts the next epoch (or continues the epoch a load_state_dict left unfinished).
    iterator begin();
    iterator end() { return iterator(nullptr); }

    /// {"generator": the generator state before this epoch's shuffle (bytes as doubles),
    ///  "epoch", "position": batches handed out in this epoch}. Saved inside an epoch, the
    /// restored loader continues with the next batch of that same order.
    NamedArrays state_dict() const;
    void validate_state_dict(const NamedArrays& state) const;
    void load_state_dict(const NamedArrays& state);

private:
    void start_epoch();
    bool fetch(Batch& out);  // the next batch of this epoch, false when it is over

    const TensorDataset& dataset_;
    DataLoaderOptions options_;
    Generator generator_;
    std::string epoch_start_state_;  // generator state before the current epoch's shuffle
    std::vector<std::size_t> order_;
    std::size_t position_ = 0;  // batches handed out in the current epoch
    std::int64_t epoch_ = 0;
    bool resume_pending_ = false;
};

/// A string as an array of its bytes (one double each), for storing text in .npz files.
Array bytes_to_array(const std::string& bytes);
/// The inverse of bytes_to_array; throws naming `what` if an element is not a byte value.
std::string array_to_bytes(const Array& a, const std::string& what);

/// Fashion-MNIST (or MNIST) from `dir`: split "train" (60000) or "test" (10000). Features are
/// (N, 784) doubles pixel/255 in [0, 1], labels 0..9. Reads <prefix>-images-idx3-ubyte[.gz] and
/// <prefix>-labels-idx1-ubyte[.gz] with prefix "train" / "t10k". A missing, truncated or
/// inconsistent file throws xg::Error naming the file.
TensorDataset load_fashion_mnist(const std::string& split, const std::string& dir = "/usr/share/datasets/fashion-mnist");

}  // namespace xg::optim
