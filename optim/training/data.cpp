#include "optim/training/data.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "core/io/io.hpp"

namespace xg::optim {

// ---- TensorDataset ------------------------------------------------------------------------

TensorDataset::TensorDataset(Array features, IndexArray labels)
    : features_(std::move(features)), labels_(std::move(labels)), targets_(Array::from_shape({0})) {
    if (features_.dimension() < 1) fail("TensorDataset", "features must have a leading sample axis, got a 0-D array");
    if (labels_.dimension() != 1 || labels_.size() != features_.shape()[0]) {
        fail("TensorDataset", fmt::format("features {} and labels {} disagree: labels must be (N,) with N = {}",
                                          shape_str(shape_of(features_)),
                                          shape_str(Shape(labels_.shape().begin(), labels_.shape().end())),
                                          features_.shape()[0]));
    }
    size_ = labels_.size();
    sample_size_ = size_ == 0 ? 0 : features_.size() / size_;
}

TensorDataset::TensorDataset(Array features, Array targets)
    : features_(std::move(features)), labels_(IndexArray::from_shape({0})), targets_(std::move(targets)),
      has_targets_(true) {
    if (features_.dimension() < 1 || targets_.dimension() < 1 || targets_.shape()[0] != features_.shape()[0]) {
        fail("TensorDataset", fmt::format("features {} and float targets {} disagree: both need the same leading sample "
                                          "axis N",
                                          shape_str(shape_of(features_)), shape_str(shape_of(targets_))));
    }
    size_ = features_.shape()[0];
    sample_size_ = size_ == 0 ? 0 : features_.size() / size_;
    target_size_ = size_ == 0 ? 0 : targets_.size() / size_;
}

TensorDataset::TensorDataset(FloatArray features, IndexArray labels)
    : features32_(std::move(features)), float32_(true), labels_(std::move(labels)), targets_(Array::from_shape({0})) {
    if (features32_.dimension() < 1) fail("TensorDataset", "features must have a leading sample axis, got a 0-D array");
    if (labels_.dimension() != 1 || labels_.size() != features32_.shape()[0]) {
        fail("TensorDataset", fmt::format("float32 features {} and labels {} disagree: labels must be (N,) with N = {}",
                                          shape_str(Shape(features32_.shape().begin(), features32_.shape().end())),
                                          shape_str(Shape(labels_.shape().begin(), labels_.shape().end())),
                                          features32_.shape()[0]));
    }
    size_ = labels_.size();
    sample_size_ = size_ == 0 ? 0 : features32_.size() / size_;
}

const Array& TensorDataset::features() const {
    if (float32_) fail("TensorDataset.features", "the features are float32: read features32()");
    return features_;
}

const FloatArray& TensorDataset::features32() const {
    if (!float32_) fail("TensorDataset.features32", "the features are float64: read features()");
    return features32_;
}

TensorDataset TensorDataset::to(Dtype dtype) const {
    if (dtype == this->dtype()) return *this;
    if (has_targets_) fail("TensorDataset.to", "only a dataset of integer labels converts its features");
    if (dtype == Dtype::Float32) return TensorDataset(to_float32_array(features_), labels_);
    return TensorDataset(to_float64_array(features32_), labels_);
}

Shape TensorDataset::sample_shape() const {
    const auto& dims = float32_ ? features32_.shape() : features_.shape();
    const Shape s(dims.begin(), dims.end());
    return s.empty() ? Shape{} : Shape(s.begin() + 1, s.end());
}

TensorDataset TensorDataset::subset(std::int64_t start_arg, std::int64_t count_arg) const {
    if (start_arg < 0) fail("TensorDataset.subset", fmt::format("start must not be negative, got {}", start_arg));
    if (count_arg < 0) fail("TensorDataset.subset", fmt::format("count must not be negative, got {}", count_arg));
    const auto start = static_cast<std::size_t>(start_arg), count = static_cast<std::size_t>(count_arg);
    if (start > size() || count > size() - start) {
        fail("TensorDataset.subset", fmt::format("samples [{}, {}) are out of range for a dataset of {}", start,
                                                 start + count, size()));
    }
    std::vector<std::size_t> indices(count);
    for (std::size_t i = 0; i < count; ++i) indices[i] = start + i;
    Batch b = batch(indices);
    if (float32_) return TensorDataset(b.x.values<float>(), std::move(b.y));
    if (has_targets_) return TensorDataset(b.x.value(), b.target.value());
    return TensorDataset(b.x.value(), std::move(b.y));
}

Batch TensorDataset::batch(const std::vector<std::size_t>& indices) const {
    return float32_ ? gather(features32_, indices) : gather(features_, indices);
}

// Copies the samples' rows as they are stored: a float32 dataset's batch is a float32 tensor made
// without widening (Tensor::from_float32).
template <class T>
Batch TensorDataset::gather(const xt::xarray<T>& features, const std::vector<std::size_t>& indices) const {
    Shape shape = sample_shape();
    shape.insert(shape.begin(), indices.size());
    xt::xarray<T> x = xt::xarray<T>::from_shape(shape);
    IndexArray y = IndexArray::from_shape({has_targets_ ? 0 : indices.size()});
    Shape target_shape = shape_of(targets_);
    if (has_targets_) target_shape[0] = indices.size();
    Array t = has_targets_ ? Array::from_shape(target_shape) : Array();
    for (std::size_t i = 0; i < indices.size(); ++i) {
        if (indices[i] >= size()) {
            fail("TensorDataset.batch", fmt::format("sample index {} is out of range for a dataset of {}", indices[i], size()));
        }
        std::memcpy(x.data() + i * sample_size_, features.data() + indices[i] * sample_size_, sample_size_ * sizeof(T));
        if (has_targets_) {
            std::memcpy(t.data() + i * target_size_, targets_.data() + indices[i] * target_size_,
                        target_size_ * sizeof(double));
        } else {
            y(i) = labels_(indices[i]);
        }
    }
    Tensor inputs;
    if constexpr (std::is_same_v<T, float>) inputs = Tensor::from_float32(std::move(x));
    else inputs = Tensor(std::move(x));
    return Batch{std::move(inputs), std::move(y), has_targets_ ? Tensor(std::move(t)) : Tensor()};
}

// ---- DataLoader ---------------------------------------------------------------------------

DataLoader::DataLoader(const TensorDataset& dataset, const DataLoaderOptions& options)
    : dataset_(dataset), options_(options), generator_(options.seed()) {
    if (options.batch_size() < 1) fail("DataLoader", fmt::format("batch_size must be positive, got {}", options.batch_size()));
    if (dataset.size() == 0) fail("DataLoader", "the dataset is empty");
}

DataLoader::DataLoader(const TensorDataset& dataset, std::int64_t batch_size, bool shuffle, std::uint64_t seed,
                       bool drop_last)
    : DataLoader(dataset, DataLoaderOptions(batch_size).shuffle(shuffle).seed(seed).drop_last(drop_last)) {}

std::size_t DataLoader::size() const {
    const std::size_t n = dataset_.size(), b = static_cast<std::size_t>(options_.batch_size());
    return options_.drop_last() ? n / b : (n + b - 1) / b;
}

struct DataLoader::Epoch {
    std::vector<std::size_t> order;  // the samples of this epoch, in the order they are served
    std::size_t position = 0;       // batches handed out so far
};

void DataLoader::start_epoch() {
    epoch_start_state_ = generator_.state();
    auto epoch = std::make_shared<Epoch>();
    epoch->order.resize(dataset_.size());
    for (std::size_t i = 0; i < epoch->order.size(); ++i) epoch->order[i] = i;
    if (options_.shuffle()) {
        // Fisher-Yates with our own generator: the same order on every platform.
        std::vector<std::size_t>& order = epoch->order;
        for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[generator_.randint(i)]);
    }
    current_ = std::move(epoch);
    ++epoch_;
}

bool DataLoader::fetch(Batch& out, Epoch& epoch) const {
    if (epoch.position >= size()) return false;
    const auto batch_size = static_cast<std::size_t>(options_.batch_size());
    const std::size_t start = epoch.position * batch_size;
    const std::size_t stop = std::min(start + batch_size, epoch.order.size());
    out = dataset_.batch(std::vector<std::size_t>(epoch.order.begin() + start, epoch.order.begin() + stop));
    ++epoch.position;
    return true;
}

DataLoader::iterator DataLoader::begin() {
    // An iterator keeps its own epoch (shared with nobody but the loader's state_dict), so a
    // begin() inside a running loop starts a new epoch without cutting the running one short.
    if (!resume_pending_) start_epoch();
    resume_pending_ = false;
    return iterator(this, current_);
}

DataLoader::iterator::iterator(const DataLoader* loader, std::shared_ptr<Epoch> epoch)
    : loader_(loader), epoch_(std::move(epoch)) {
    if (epoch_ && !loader_->fetch(batch_, *epoch_)) epoch_ = nullptr;
}

DataLoader::iterator& DataLoader::iterator::operator++() {
    if (epoch_ && !loader_->fetch(batch_, *epoch_)) epoch_ = nullptr;
    return *this;
}

// ---- DataLoader state ---------------------------------------------------------------------

Array bytes_to_array(const std::string& bytes) {
    Array a = Array::from_shape({bytes.size()});
    for (std::size_t i = 0; i < bytes.size(); ++i) a(i) = static_cast<unsigned char>(bytes[i]);
    return a;
}

std::string array_to_bytes(const Array& a, const std::string& what) {
    if (a.dimension() != 1) fail("array_to_bytes", fmt::format("{} should be 1-D, has shape {}", what, shape_str(shape_of(a))));
    std::string out(a.size(), '\0');
    for (std::size_t i = 0; i < a.size(); ++i) {
        const double v = a(i);
        if (!(v >= 0 && v <= 255) || v != std::floor(v)) {
            fail("array_to_bytes", fmt::format("{} element {} is {}, not a byte value", what, i, v));
        }
        out[i] = static_cast<char>(static_cast<unsigned char>(v));
    }
    return out;
}

NamedArrays DataLoader::state_dict() const {
    auto scalar = [](double v) {
        Array a = Array::from_shape(Shape{});
        a() = v;
        return a;
    };
    // Before the first epoch there is no epoch-start state yet: the generator is still fresh.
    const std::string rng = epoch_ == 0 ? generator_.state() : epoch_start_state_;
    return {{"generator", bytes_to_array(rng)},
            {"epoch", scalar(static_cast<double>(epoch_))},
            {"position", scalar(static_cast<double>(current_ ? current_->position : 0))}};
}

void DataLoader::validate_state_dict(const NamedArrays& state) const {
    const char* op = "DataLoader.load_state_dict";
    if (state.size() != 3 || state[0].first != "generator" || state[1].first != "epoch" || state[2].first != "position") {
        std::string keys;
        for (const auto& entry : state) keys += (keys.empty() ? "" : ", ") + entry.first;
        fail(op, fmt::format("expected entries generator, epoch, position; got [{}]", keys));
    }
    Generator probe;
    probe.set_state(array_to_bytes(state[0].second, "DataLoader state 'generator'"));
    for (std::size_t k = 1; k < 3; ++k) {
        const Array& a = state[k].second;
        const double v = a.size() == 1 ? a.data()[0] : -1.0;
        if (!(v >= 0) || v != std::floor(v) || v > 9007199254740992.0) {
            fail(op, fmt::format("entry '{}' should be one non-negative whole number", state[k].first));
        }
    }
    const double position = state[2].second.data()[0];
    if (position > static_cast<double>(size())) {
        fail(op, fmt::format("saved position {} is beyond the {} batches of an epoch of this loader (different "
                             "dataset or batch size?)", position, size()));
    }
}

void DataLoader::load_state_dict(const NamedArrays& state) {
    validate_state_dict(state);
    generator_.set_state(array_to_bytes(state[0].second, "DataLoader state 'generator'"));
    const auto epoch = static_cast<std::int64_t>(state[1].second.data()[0]);
    const auto position = static_cast<std::size_t>(state[2].second.data()[0]);
    if (epoch == 0) {
        epoch_ = 0;
        current_ = nullptr;
        resume_pending_ = false;
        return;
    }
    // Redraw the saved epoch's order (this also advances the generator exactly as then).
    epoch_ = epoch - 1;
    start_epoch();
    current_->position = position;
    // A finished epoch is not resumed: the next begin() starts a new one, as without the save.
    resume_pending_ = position < size();
}

// ---- Fashion-MNIST --------------------------------------------------------------------------

namespace {

// The .gz file if present, else the uncompressed one (the error names both when neither exists).
std::string find_idx_file(const std::string& dir, const std::string& stem) {
    const std::string gz = dir + "/" + stem + ".gz", plain = dir + "/" + stem;
    if (std::ifstream(gz).good()) return gz;
    if (std::ifstream(plain).good()) return plain;
    fail("load_fashion_mnist", fmt::format("cannot open {} (or {})", gz, plain));
}

}  // namespace

TensorDataset load_fashion_mnist(const std::string& split, const std::string& dir, Dtype dtype) {
    const char* op = "load_fashion_mnist";
    if (split != "train" && split != "test") fail(op, fmt::format("split must be \"train\" or \"test\", got \"{}\"", split));
    const std::string prefix = split == "train" ? "train" : "t10k";
    const std::string images_path = find_idx_file(dir, prefix + "-images-idx3-ubyte");
    const std::string labels_path = find_idx_file(dir, prefix + "-labels-idx1-ubyte");
    const IdxData images = read_idx(images_path);
    const IdxData labels = read_idx(labels_path);
    if (images.shape.size() != 3 || images.shape[1] != 28 || images.shape[2] != 28) {
        fail(op, fmt::format("{}: expected images of shape (N, 28, 28), got {}", images_path, shape_str(images.shape)));
    }
    if (labels.shape.size() != 1 || labels.shape[0] != images.shape[0]) {
        fail(op, fmt::format("{}: expected {} labels to match {}, got shape {}", labels_path, images.shape[0],
                             images_path, shape_str(labels.shape)));
    }
    const std::size_t n = images.shape[0], pixels = 28 * 28;
    IndexArray y = IndexArray::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
        if (labels.bytes[i] > 9) fail(op, fmt::format("{}: label {} of sample {} is not a class 0..9", labels_path, labels.bytes[i], i));
        y(i) = labels.bytes[i];
    }
    // pixel/255 in double, stored in the dataset's dtype (a float32 pixel is the float64 one rounded)
    if (dtype == Dtype::Float32) {
        FloatArray x = FloatArray::from_shape({n, pixels});
        float* px = x.data();
        for (std::size_t i = 0; i < n * pixels; ++i) px[i] = static_cast<float>(static_cast<double>(images.bytes[i]) / 255.0);
        return TensorDataset(std::move(x), std::move(y));
    }
    Array x = Array::from_shape({n, pixels});
    double* px = x.data();
    for (std::size_t i = 0; i < n * pixels; ++i) px[i] = static_cast<double>(images.bytes[i]) / 255.0;
    return TensorDataset(std::move(x), std::move(y));
}

}  // namespace xg::optim
