// Checkpoints: a resumed run equals an uninterrupted one bit for bit; a crash mid-save keeps
// the previous checkpoint loadable; a mismatched file changes nothing.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/io/io.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"

namespace xg_test_training_checkpoint {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using namespace xg::optim;

namespace {

// A directory per process (two suites, Release and ASan or two checkouts, may run at once on one
// machine), removed when the process ends.
struct ProcessTempDir {
    std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("xgrad_test_checkpoint_" + std::to_string(::getpid()));
    ~ProcessTempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
    }
};

std::string temp_path(const std::string& name) {
    static const ProcessTempDir temp;
    std::filesystem::create_directories(temp.dir);
    return (temp.dir / name).string();
}

// 40 samples of 4 features, 3 classes.
TensorDataset toy_data() {
    Generator gen(99);
    Array x = Array::from_shape({40, 4});
    for (double& v : x) v = gen.normal();
    IndexArray y = IndexArray::from_shape({40});
    for (std::size_t i = 0; i < 40; ++i) y(i) = static_cast<std::int64_t>(gen.randint(3));
    return TensorDataset(x, y);
}

// Everything a run owns. Dropout draws from the default generator, the loader shuffles with its
// own: both must be restored for an exact resume.
struct Run {
    std::shared_ptr<nn::Sequential> model;
    std::unique_ptr<AdamW> opt;
    std::unique_ptr<WarmupCosine> sched;
    std::unique_ptr<DataLoader> loader;
    std::int64_t step = 0;

    explicit Run(const TensorDataset& data, std::uint64_t width = 8) {
        manual_seed(5);
        model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
            std::make_shared<nn::Linear>(4, width), std::make_shared<nn::GELU>(), std::make_shared<nn::Dropout>(0.2),
            std::make_shared<nn::LayerNorm>(width), std::make_shared<nn::Linear>(width, 3)});
        opt = std::make_unique<AdamW>(model->parameters(), AdamWOptions(0.05).weight_decay(0.1));
        sched = std::make_unique<WarmupCosine>(*opt, 3, 20, 0.1);
        loader = std::make_unique<DataLoader>(data, DataLoaderOptions(8).shuffle(true).seed(11));
    }
    Checkpoint checkpoint() { return Checkpoint(*model, *opt, sched.get(), loader.get()); }

    void train_until(std::int64_t last) {
        while (step < last) {
            for (const Batch& b : *loader) {
                opt->zero_grad();
                Tensor loss = nn::cross_entropy(model->forward(b.x), b.y);
                loss.backward();
                clip_grad_norm(model->parameters(), 0.5);
                opt->step();
                sched->step();
                if (++step == last) break;
            }
        }
    }
};

bool same_state(const NamedArrays& a, const NamedArrays& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i].first != b[i].first || !(a[i].second == b[i].second)) return false;
    }
    return true;
}

}  // namespace

TEST_CASE("resuming from a checkpoint continues bit for bit", "[checkpoint]") {
    const TensorDataset data = toy_data();  // 5 batches per epoch
    const std::int64_t total = 14;
    Run straight(data);
    straight.train_until(total);
    const NamedArrays expected = straight.checkpoint().collect({total, 0});

    for (std::int64_t k : {3, 5, 9}) {  // inside an epoch, at an epoch end, inside a later one
        const std::string path = temp_path(fmt::format("resume_{}.npz", k));
        {
            Run first(data);
            first.train_until(k);
            first.checkpoint().save(path, {k, 0});
        }
        xg::randn({7});  // disturb the default generator: load must restore it
        Run resumed(data);
        const TrainingProgress progress = resumed.checkpoint().load(path);
        CHECK(progress.step == k);
        resumed.step = progress.step;
        resumed.train_until(total);
        INFO("checkpoint after step " << k);
        CHECK(same_state(resumed.checkpoint().collect({total, 0}), expected));
        const auto a = straight.model->parameters(), b = resumed.model->parameters();
        for (std::size_t i = 0; i < a.size(); ++i) {
            const bool identical = a[i].value() == b[i].value();
            CHECK(identical);
        }
        std::filesystem::remove(path);
    }
}

TEST_CASE("a failure mid-save leaves the previous checkpoint loadable", "[checkpoint]") {
    const TensorDataset data = toy_data();
    const std::string path = temp_path("crash.npz");
    Run run(data);
    run.train_until(2);
    run.checkpoint().save(path, {2, 0});
    const NamedArrays saved_at_2 = run.checkpoint().collect({2, 0});
    run.train_until(4);

    // An error after the new file is fully written but before it replaces the old one.
    CHECK_THROWS_WITH(run.checkpoint().save(path, {4, 0}, [](const std::string&) { throw Error("simulated failure"); }),
                      Catch::Contains("simulated failure"));
    // A process killed halfway through writing: no cleanup code runs at all.
    const pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        run.checkpoint().save(path, {4, 0}, [](const std::string& tmp) {
            std::filesystem::resize_file(tmp, std::filesystem::file_size(tmp) / 2);
            _exit(3);
        });
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WEXITSTATUS(status) == 3);

    Run fresh(data);
    const TrainingProgress progress = fresh.checkpoint().load(path);
    CHECK(progress.step == 2);
    CHECK(same_state(fresh.checkpoint().collect({2, 0}), saved_at_2));
    // Leftover temporaries of the killed writer are never mistaken for the checkpoint.
    for (const auto& entry : std::filesystem::directory_iterator(std::filesystem::path(path).parent_path())) {
        if (entry.path() != path && entry.path().filename().string().rfind("crash", 0) == 0) {
            std::filesystem::remove(entry.path());
        }
    }
    std::filesystem::remove(path);
}

TEST_CASE("a checkpoint that does not fit changes nothing", "[checkpoint]") {
    const TensorDataset data = toy_data();
    const std::string path = temp_path("wide.npz");
    Run wide(data, 16);
    wide.train_until(3);
    wide.checkpoint().save(path, {3, 0});

    Run narrow(data, 8);
    narrow.train_until(1);
    const NamedArrays before = narrow.checkpoint().collect({1, 0});
    const std::string rng_before = default_generator().state();
    CHECK_THROWS_WITH(narrow.checkpoint().load(path),
                      Catch::Contains("model.0.weight") && Catch::Contains("(16, 4)") && Catch::Contains("wide.npz"));
    CHECK(same_state(narrow.checkpoint().collect({1, 0}), before));
    CHECK(default_generator().state() == rng_before);

    // Optimizer state of the wrong shape, with a model that fits: still nothing changes.
    NamedArrays tampered = narrow.checkpoint().collect({1, 0});
    for (auto& [key, value] : tampered) {
        if (key == "optim.state.0.exp_avg") value = xt::zeros<double>({2, 2});
        if (key.rfind("model.", 0) == 0) value = value + 1.0;
    }
    CHECK_THROWS_WITH(narrow.checkpoint().restore(tampered), Catch::Contains("state.0.exp_avg"));
    CHECK(same_state(narrow.checkpoint().collect({1, 0}), before));

    // A scheduler-less restore of a file with schedule state is refused, not half-applied.
    Checkpoint without_sched(*narrow.model, *narrow.opt, nullptr, narrow.loader.get());
    CHECK_THROWS_WITH(without_sched.restore(before), Catch::Contains("scheduler"));

    // Evaluation only needs the weights.
    Run other(data, 16);
    load_model_from_checkpoint(path, *other.model);
    const bool same_weights = other.model->parameters()[0].value() == wide.model->parameters()[0].value();
    CHECK(same_weights);
    std::filesystem::remove(path);
}

TEST_CASE("a truncated checkpoint file is rejected with its name", "[checkpoint]") {
    const TensorDataset data = toy_data();
    const std::string path = temp_path("truncated.npz");
    Run run(data);
    run.checkpoint().save(path, {0, 0});
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);
    CHECK_THROWS_WITH(run.checkpoint().load(path), Catch::Contains("truncated.npz"));
    std::filesystem::remove(path);
}

}  // namespace xg_test_training_checkpoint
