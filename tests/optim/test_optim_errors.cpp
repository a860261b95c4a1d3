// Optimizer and checkpoint misuse raises xg::Error naming the problem.
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/io/io.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/optim.hpp"
#include "tests/support/error_matchers.hpp"
#include "tests/support/temp_dir.hpp"

namespace xg_test_optim_errors {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace fs = std::filesystem;
using namespace xg;

using xg::test::same_state;
using xg::test::small_model;
using xg::test::TempDir;

TEST_CASE("optimizer and checkpoint misuse", "[errors]") {
    manual_seed(6);
    TempDir dir;
    auto model = small_model();
    optim::Adam opt(model->parameters(), optim::AdamOptions(0.01));
    const Tensor w = model->parameters()[0];
    REQUIRE_ERROR(optim::Adam({w}, optim::AdamOptions(0.01).eps(-1.0)), "Adam", "eps -1");
    REQUIRE_ERROR(optim::SGD({w}, optim::SGDOptions(std::nan(""))), "add_param_group", "invalid learning rate nan");
    REQUIRE_ERROR(optim::clip_grad_norm(model->parameters(), -1.0), "clip_grad_norm", "max_norm", "-1");
    REQUIRE_ERROR(optim::SGD({w, w}, optim::SGDOptions(0.1)), "add_param_group", "parameter 1 (shape (4, 3))",
                  "listed twice", "also as parameter 0");
    optim::SGD two_groups({optim::ParamGroupSpec{{w}, std::nullopt, std::nullopt}}, optim::SGDOptions(0.1));
    REQUIRE_ERROR(two_groups.add_param_group(optim::ParamGroupSpec{{w}, std::nullopt, std::nullopt}), "add_param_group", "parameter 0 of group 1",
                  "(4, 3)", "earlier parameter group");
    // A checkpoint is not a model file, and a model file is not a checkpoint.
    optim::Checkpoint ckpt(*model, opt);
    ckpt.save(dir.file("ckpt.npz"), {3, 1});
    model->save(dir.file("model.npz"));
    const NamedArrays before = model->state_dict();
    REQUIRE_ERROR(model->load(dir.file("ckpt.npz")), "load_state_dict", "ckpt.npz", "missing keys: 0.bias, 0.weight",
                  "unexpected keys: meta.format");
    REQUIRE_ERROR(optim::load_model_from_checkpoint(dir.file("model.npz"), *model), "model.npz", "no 'model.' entries");
    REQUIRE_ERROR(ckpt.load(dir.file("model.npz")), "load_checkpoint", "model.npz", "unexpected entry '0.weight'");
    REQUIRE_ERROR(ckpt.save(dir.file("neg.npz"), {-1, 0}), "save_checkpoint", "-1");
    CHECK(same_state(model->state_dict(), before));
    CHECK_FALSE(fs::exists(dir.file("neg.npz")));
}


}  // namespace xg_test_optim_errors
