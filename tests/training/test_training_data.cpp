// TensorDataset / DataLoader batching, deterministic shuffling, drop_last, mid-epoch resume,
// and the Fashion-MNIST loader (real files when installed, truncated copies for errors).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include <catch2/catch.hpp>

#include "optim/training/data.hpp"

namespace xg_test_training_data {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::optim;

namespace {

// 10 samples of shape (2,): sample i is [i, 100 + i], label i % 3.
TensorDataset numbered(std::size_t n = 10) {
    Array x = Array::from_shape({n, 2});
    IndexArray y = IndexArray::from_shape({n});
    for (std::size_t i = 0; i < n; ++i) {
        x(i, 0) = static_cast<double>(i);
        x(i, 1) = 100.0 + static_cast<double>(i);
        y(i) = static_cast<std::int64_t>(i % 3);
    }
    return TensorDataset(x, y);
}

// The sample ids of every batch of one epoch.
std::vector<std::vector<std::size_t>> epoch_ids(DataLoader& loader) {
    std::vector<std::vector<std::size_t>> out;
    for (const Batch& b : loader) {
        std::vector<std::size_t> ids;
        for (std::size_t i = 0; i < b.x.size(0); ++i) {
            const auto id = static_cast<std::size_t>(b.x(i, 0));
            CHECK(b.x(i, 1) == 100.0 + static_cast<double>(id));
            CHECK(b.y(i) == static_cast<std::int64_t>(id % 3));
            ids.push_back(id);
        }
        out.push_back(ids);
    }
    return out;
}

std::string temp_dir(const std::string& name) {
    // per process: two suites (Release and ASan, or two checkouts) may run at once on one machine
    const auto dir = std::filesystem::temp_directory_path() / ("xgrad_test_data_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir.string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

// An uncompressed IDX header: magic 00 00 08 <ndim>, then big-endian sizes.
std::string idx_header(const std::vector<std::uint32_t>& shape) {
    std::string h = {0, 0, 8, static_cast<char>(shape.size())};
    for (std::uint32_t s : shape) {
        for (int k = 3; k >= 0; --k) h.push_back(static_cast<char>((s >> (8 * k)) & 0xFF));
    }
    return h;
}

}  // namespace

TEST_CASE("DataLoader batches in order without shuffle", "[data]") {
    const TensorDataset ds = numbered(10);
    DataLoader loader(ds, 4);
    CHECK(loader.size() == 3);
    const auto ids = epoch_ids(loader);
    REQUIRE(ids.size() == 3);
    CHECK(ids[0] == std::vector<std::size_t>{0, 1, 2, 3});
    CHECK(ids[2] == std::vector<std::size_t>{8, 9});  // the short last batch
    CHECK(loader.epoch() == 1);

    DataLoader dropping(ds, DataLoaderOptions(4).drop_last(true));
    CHECK(dropping.size() == 2);
    CHECK(epoch_ids(dropping).size() == 2);
    DataLoader exact(ds, 5, false, 0, true);
    CHECK(epoch_ids(exact).size() == 2);
}

TEST_CASE("DataLoader shuffling is a seeded permutation, new every epoch", "[data]") {
    const TensorDataset ds = numbered(50);
    DataLoader a(ds, DataLoaderOptions(8).shuffle(true).seed(7));
    DataLoader b(ds, DataLoaderOptions(8).shuffle(true).seed(7));
    DataLoader c(ds, DataLoaderOptions(8).shuffle(true).seed(8));
    const auto a1 = epoch_ids(a), a2 = epoch_ids(a);
    CHECK(a1 == epoch_ids(b));
    CHECK(a2 == epoch_ids(b));
    CHECK(a1 != a2);
    CHECK(a1 != epoch_ids(c));
    std::multiset<std::size_t> seen;
    for (const auto& batch : a1) seen.insert(batch.begin(), batch.end());
    CHECK(seen.size() == 50);
    CHECK(std::set<std::size_t>(seen.begin(), seen.end()).size() == 50);
    // Independent of the default generator.
    manual_seed(1);
    DataLoader d(ds, DataLoaderOptions(8).shuffle(true).seed(7));
    xg::randn({10});
    CHECK(epoch_ids(d) == a1);
}

TEST_CASE("DataLoader resumes mid-epoch and at epoch ends from its state_dict", "[data]") {
    const TensorDataset ds = numbered(23);
    const auto options = DataLoaderOptions(5).shuffle(true).seed(3);
    DataLoader straight(ds, options);
    std::vector<std::vector<std::size_t>> all;
    for (int e = 0; e < 3; ++e) {
        for (auto& batch : epoch_ids(straight)) all.push_back(batch);
    }
    for (std::size_t stop : {0u, 2u, 5u, 7u}) {  // batches consumed before saving (5 = one epoch)
        DataLoader first(ds, options);
        std::vector<std::vector<std::size_t>> got;
        std::size_t consumed = 0;
        while (consumed < stop) {
            for (const Batch& b : first) {
                std::vector<std::size_t> ids;
                for (std::size_t i = 0; i < b.x.size(0); ++i) ids.push_back(static_cast<std::size_t>(b.x(i, 0)));
                got.push_back(ids);
                if (++consumed == stop) break;
            }
        }
        const NamedArrays state = first.state_dict();
        DataLoader resumed(ds, options);
        resumed.load_state_dict(state);
        while (got.size() < all.size()) {
            for (auto& batch : epoch_ids(resumed)) got.push_back(batch);
        }
        INFO("saved after " << stop << " batches");
        CHECK(got == all);
    }
}

TEST_CASE("DataLoader and dataset errors", "[data]") {
    CHECK_THROWS_WITH(TensorDataset(Array::from_shape({3, 2}), IndexArray::from_shape({4})),
                      Catch::Contains("(3, 2)") && Catch::Contains("(4,)"));
    const TensorDataset ds = numbered(10);
    CHECK_THROWS_WITH(DataLoader(ds, 0), Catch::Contains("batch_size"));
    CHECK_THROWS_WITH(ds.subset(8, 5), Catch::Contains("out of range"));
    CHECK(ds.subset(2, 3).features()(0, 0) == 2.0);
    DataLoader loader(ds, 2);
    NamedArrays state = loader.state_dict();
    state[2].second() = 99;
    CHECK_THROWS_WITH(loader.load_state_dict(state), Catch::Contains("beyond the 5 batches"));
    state = loader.state_dict();
    state[0].second(0) = 300;
    CHECK_THROWS_WITH(loader.load_state_dict(state), Catch::Contains("not a byte"));
    CHECK(array_to_bytes(bytes_to_array("a\0b\xff" + std::string("z")), "x") == "a\0b\xff" + std::string("z"));
}

TEST_CASE("Fashion-MNIST test split loads as (10000, 784) in [0, 1]", "[data]") {
    const std::string dir = "/usr/share/datasets/fashion-mnist";
    if (!std::filesystem::exists(dir + "/t10k-images-idx3-ubyte.gz")) {
        WARN("Fashion-MNIST is not installed in " << dir << "; skipped");
        return;
    }
    const TensorDataset test = load_fashion_mnist("test", dir);
    REQUIRE(test.size() == 10000);
    CHECK(test.sample_shape() == Shape{784});
    CHECK(xt::amin(test.features())() == 0.0);
    CHECK(xt::amax(test.features())() == 1.0);
    std::vector<int> counts(10, 0);
    for (auto label : test.labels()) counts.at(static_cast<std::size_t>(label))++;
    for (int c : counts) CHECK(c == 1000);  // the test split is balanced
}

TEST_CASE("a truncated or inconsistent Fashion-MNIST file is named in the error", "[data]") {
    const std::string dir = temp_dir("fmnist");
    write_bytes(dir + "/t10k-images-idx3-ubyte", idx_header({4, 28, 28}) + std::string(100, '\x01'));
    write_bytes(dir + "/t10k-labels-idx1-ubyte", idx_header({4}) + std::string(4, '\x02'));
    CHECK_THROWS_WITH(load_fashion_mnist("test", dir), Catch::Contains("t10k-images-idx3-ubyte"));

    write_bytes(dir + "/t10k-images-idx3-ubyte", idx_header({4, 28, 28}) + std::string(4 * 784, '\x01'));
    write_bytes(dir + "/t10k-labels-idx1-ubyte", idx_header({3}) + std::string(3, '\x02'));
    CHECK_THROWS_WITH(load_fashion_mnist("test", dir), Catch::Contains("t10k-labels-idx1-ubyte"));

    write_bytes(dir + "/t10k-labels-idx1-ubyte", idx_header({4}) + std::string("\x01\x02\x0c\x00", 4));
    CHECK_THROWS_WITH(load_fashion_mnist("test", dir), Catch::Contains("label 12"));

    write_bytes(dir + "/t10k-labels-idx1-ubyte", idx_header({4}) + std::string("\x01\x02\x03\x00", 4));
    const TensorDataset ok = load_fashion_mnist("test", dir);
    CHECK(ok.features()(3, 783) == 1.0 / 255.0);
    CHECK(ok.labels()(2) == 3);
    CHECK_THROWS_WITH(load_fashion_mnist("train", dir), Catch::Contains("train-images-idx3-ubyte"));
    CHECK_THROWS_WITH(load_fashion_mnist("valid", dir), Catch::Contains("split"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("a float32 dataset holds its features as float32 and makes float32 batches without widening", "[data][float32]") {
    const TensorDataset ds = numbered(10);
    const TensorDataset ds32 = ds.to(kFloat32);
    CHECK(ds.dtype() == kFloat64);
    REQUIRE(ds32.dtype() == kFloat32);
    CHECK(ds32.size() == 10);
    CHECK(ds32.sample_shape() == Shape{2});
    CHECK(xt::all(xt::equal(ds32.features32(), to_float32_array(ds.features()))));
    CHECK_THROWS_WITH(ds32.features(), Catch::Contains("TensorDataset.features") && Catch::Contains("features32()"));
    CHECK_THROWS_WITH(ds.features32(), Catch::Contains("TensorDataset.features32") && Catch::Contains("float64"));
    CHECK(xt::all(xt::equal(ds32.to(kFloat64).features(), ds.features())));  // float32 -> float64 is exact

    DataLoader loader64(ds, DataLoaderOptions(4).shuffle(true).seed(3));
    DataLoader loader32(ds32, DataLoaderOptions(4).shuffle(true).seed(3));
    auto b64 = loader64.begin();
    std::size_t batches = 0;
    for (const Batch& b : loader32) {
        INFO("batch " << batches);
        REQUIRE(b64 != loader64.end());
        CHECK(b.x.dtype() == kFloat32);
        CHECK(b.x.node()->value_mirror == Node::Mirror::None);  // gathered as float32, never widened
        CHECK(xt::all(xt::equal(b.x.values<float>(), to_float32_array(b64->x.value()))));
        CHECK(xt::all(xt::equal(b.y, b64->y)));
        ++b64, ++batches;
    }
    CHECK(batches == 3);
    const TensorDataset part = ds32.subset(2, 3);
    CHECK(part.dtype() == kFloat32);
    CHECK(part.features32()(0, 1) == 102.0f);
    CHECK(part.labels()(0) == 2);
    CHECK_THROWS_WITH(TensorDataset(FloatArray::from_shape({3, 2}), IndexArray::from_shape({4})),
                      Catch::Contains("TensorDataset") && Catch::Contains("(3, 2)") && Catch::Contains("(4,)"));
    CHECK_THROWS_WITH(TensorDataset(FloatArray::from_shape({}), IndexArray::from_shape({1})), Catch::Contains("0-D"));
}

TEST_CASE("load_fashion_mnist in float32: every pixel/255 rounded to nearest, as the float64 dataset converted", "[data][float32]") {
    const std::string dir = temp_dir("fmnist32");
    std::string pixels(2 * 784, '\0');
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<char>((i * 7) % 256);  // all 256 values
    write_bytes(dir + "/t10k-images-idx3-ubyte", idx_header({2, 28, 28}) + pixels);
    write_bytes(dir + "/t10k-labels-idx1-ubyte", idx_header({2}) + std::string("\x05\x09", 2));
    const TensorDataset ds64 = load_fashion_mnist("test", dir), ds32 = load_fashion_mnist("test", dir, kFloat32);
    REQUIRE(ds32.dtype() == kFloat32);
    CHECK(ds32.sample_shape() == Shape{784});
    CHECK(xt::all(xt::equal(ds32.features32(), to_float32_array(ds64.features()))));
    CHECK(xt::all(xt::equal(ds32.labels(), ds64.labels())));
    std::filesystem::remove_all(dir);
}

}  // namespace xg_test_training_data
