// Interop, xgrad -> PyTorch: trains a small model with xgrad (Embedding with padding_idx, causal
// MultiheadAttention, LayerNorm, Linear, GELU, BatchNorm1d), saves it with Module::save, then runs
// torch_loads_xgrad.py, which builds the same architecture in PyTorch, loads the .npz with
// load_state_dict(strict=True) and must reproduce xgrad's logits to 1e-12.
//
//   xgrad_interop_torch <work dir>     exit 0: same logits; 77: skipped (no /usr/bin/python3 with
//                                      torch, which ctest reports as skipped); anything else: failure
//   xgrad_interop_torch <work dir> float32
//                                      the same in float32 (issue 28): the mini Pre-LN model
//                                      (tests/support/mini_model.hpp) trained 20 AdamW steps with
//                                      model.to(kFloat32) and float32 batches, saved ('<f4' entries);
//                                      torch_loads_xgrad_float32.py loads it into PyTorch in float32
//                                      and must reproduce xgrad's float32 logits within the float32
//                                      bound of tests/support/float32_bound.hpp, saved with them.
// XGRAD_PYTHON names another interpreter (e.g. XGRAD_PYTHON=/nonexistent shows the skip).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <xgrad/xgrad.hpp>

#include "tests/support/float32_bound.hpp"
#include "tests/support/mini_model.hpp"

using namespace xg;

namespace {

constexpr int kSkip = 77;
constexpr const char* kDefaultPython = "/usr/bin/python3";  // Debian's, which has python3-torch
constexpr std::size_t kVocab = 11, kEmbed = 8, kHeads = 2, kHidden = 16;

// The architecture torch_loads_xgrad.py rebuilds with the same attribute names.
class TinyLM : public nn::Module {
public:
    TinyLM() {
        emb = register_module("emb", std::make_shared<nn::Embedding>(kVocab, kEmbed, 0));
        attn = register_module("attn", std::make_shared<nn::MultiheadAttention>(kEmbed, kHeads));
        ln = register_module("ln", std::make_shared<nn::LayerNorm>(kEmbed));
        fc1 = register_module("fc1", std::make_shared<nn::Linear>(kEmbed, kHidden));
        bn = register_module("bn", std::make_shared<nn::BatchNorm1d>(kHidden));
        fc2 = register_module("fc2", std::make_shared<nn::Linear>(kHidden, kVocab));
    }

    // tokens (B, T) -> logits (B, T, vocab)
    Tensor forward(const Tensor& tokens) override {
        const long B = static_cast<long>(tokens.size(0)), T = static_cast<long>(tokens.size(1));
        Tensor x = emb->forward(tokens);
        x = x + attn->forward(x, x, x, /*causal=*/true);
        Tensor h = nn::functional::gelu(fc1->forward(ln->forward(x)));
        h = reshape(bn->forward(reshape(h, {B * T, static_cast<long>(kHidden)})), {B, T, static_cast<long>(kHidden)});
        return fc2->forward(h);
    }

    std::shared_ptr<nn::Embedding> emb;
    std::shared_ptr<nn::MultiheadAttention> attn;
    std::shared_ptr<nn::LayerNorm> ln;
    std::shared_ptr<nn::Linear> fc1;
    std::shared_ptr<nn::BatchNorm1d> bn;
    std::shared_ptr<nn::Linear> fc2;
};

// Token ids in [0, vocab) as a tensor of whole numbers; 0 is the padding token.
Tensor random_tokens(std::size_t batch, std::size_t length, Generator& gen) {
    Array t = Array::from_shape({batch, length});
    for (double& v : t) v = static_cast<double>(gen.randint(kVocab));
    return Tensor(std::move(t));
}

int run(const std::string& command) {
    const int status = std::system(command.c_str());
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A float32 tensor of standard normal values, from `gen`.
Tensor randn32(const Shape& shape, Generator& gen) {
    Array a = Array::from_shape(shape);
    for (double& v : a) v = gen.normal();
    return Tensor(std::move(a), kFloat32);
}

// The float32 variant: trains, saves model.npz and io.npz (x, xgrad's float32 logits, the exact
// logits and the bound); returns 0, or 1 when xgrad's own float32 logits break the bound.
int export_float32(const std::filesystem::path& dir) {
    constexpr std::size_t kD = 16, kLayers = 2, kClasses = 10;
    manual_seed(28);
    test::MiniPreLNModel model(kD, kLayers, kClasses);
    model.to(kFloat32);
    optim::AdamW opt(model.parameters(), optim::AdamWOptions(1e-2));
    Generator data(8);
    for (int step = 0; step < 20; ++step) {
        const Tensor x = randn32({4, 6, kD}, data);
        IndexArray target = IndexArray::from_shape({24});
        for (auto& t : target) t = static_cast<std::int64_t>(data.randint(kClasses));
        opt.zero_grad();
        const Tensor loss = nn::cross_entropy(reshape(model.forward(x), {-1, static_cast<long>(kClasses)}), target);
        if (loss.dtype() != kFloat32) {
            std::fprintf(stderr, "the float32 model's loss is %s\n", dtype_name(loss.dtype()));
            return 1;
        }
        loss.backward();
        opt.step();
    }
    const Tensor x = randn32({3, 5, kD}, data);
    Tensor logits;
    {
        NoGradGuard no_grad;
        logits = model.forward(x);
    }
    const std::string model_file = (dir / "model.npz").string();
    model.save(model_file);

    // The exact logits and the bound, from a float64 model loaded from the float32 file (exactly).
    test::MiniPreLNModel model64(kD, kLayers, kClasses);
    model64.load(model_file);
    const test::Float32LogitBound bound = test::mini_model_float32_bound(model64, Tensor(x.value(), kFloat64));
    const double ratio = test::max_bound_ratio(logits.value(), bound.logits64, bound.tolerance);
    save_npz_tensors((dir / "io.npz").string(),
                     {{"x", x}, {"logits", logits}, {"logits64", Tensor(bound.logits64, kFloat64)},
                      {"tolerance", Tensor(bound.tolerance, kFloat64)}});
    std::printf("xgrad: trained 20 AdamW steps in float32, saved %s (%zu float32 entries) and the float32 logits "
                "of a (3, 5, 16) input; K = %.1f (kappa^2 %.3f), xgrad32 vs exact: %.3f of the bound\n",
                model_file.c_str(), model.float32_keys().size(), bound.K, bound.kappa2, ratio);
    std::fflush(stdout);
    if (logits.dtype() != kFloat32 || !(ratio <= 1.0)) {
        std::fprintf(stderr, "xgrad's float32 logits (%s) are not within the float32 bound (%.3f)\n",
                     dtype_name(logits.dtype()), ratio);
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const bool float32 = argc == 3 && std::string(argv[2]) == "float32";
    if (argc != 2 && !float32) {
        std::fprintf(stderr, "usage: %s <work dir> [float32]\n", argv[0]);
        return 2;
    }
    const char* env_python = std::getenv("XGRAD_PYTHON");
    const std::string python = env_python ? env_python : kDefaultPython;
    if (access(python.c_str(), X_OK) != 0 || run(python + " -c 'import torch, numpy' 2>/dev/null") != 0) {
        std::printf("SKIPPED: %s with torch and numpy is not available (Debian: python3-torch)\n", python.c_str());
        return kSkip;
    }
    const std::filesystem::path dir = argv[1];
    std::filesystem::create_directories(dir);
    if (float32) {
        if (export_float32(dir) != 0) return 1;
        const std::string script = std::string(XGRAD_SOURCE_DIR) + "/tests/interop/torch_loads_xgrad_float32.py";
        const int rc = run(python + " " + script + " " + dir.string());
        if (rc != 0) std::fprintf(stderr, "torch_loads_xgrad_float32.py failed (exit %d)\n", rc);
        return rc == 0 ? 0 : 1;
    }

    manual_seed(13);
    TinyLM model;
    optim::AdamW opt(model.parameters(), optim::AdamWOptions(1e-2));
    Generator data(7);
    for (int step = 0; step < 20; ++step) {
        const Tensor tokens = random_tokens(4, 6, data);
        const Tensor next = random_tokens(4, 6, data);
        opt.zero_grad();
        // (B, T, vocab) logits as PyTorch wants them, classes on axis 1; padding targets ignored
        const Tensor loss = nn::cross_entropy(transpose(model.forward(tokens), 1, 2), next,
                                              nn::CrossEntropyFuncOptions().ignore_index(0));
        loss.backward();
        opt.step();
    }
    model.eval();
    const Tensor tokens = random_tokens(3, 5, data);
    Tensor logits;
    {
        NoGradGuard no_grad;
        logits = model.forward(tokens);
    }
    model.save((dir / "model.npz").string());
    save_npz((dir / "io.npz").string(), {{"tokens", tokens.value()}, {"logits", logits.value()}}, false, {"tokens"});
    std::printf("xgrad: trained 20 AdamW steps, saved %s (%zu entries) and the logits of 3 x 5 tokens\n",
                (dir / "model.npz").c_str(), model.state_dict().size());
    std::fflush(stdout);

    const std::string script = std::string(XGRAD_SOURCE_DIR) + "/tests/interop/torch_loads_xgrad.py";
    const int rc = run(python + " " + script + " " + dir.string());
    if (rc != 0) std::fprintf(stderr, "torch_loads_xgrad.py failed (exit %d)\n", rc);
    return rc == 0 ? 0 : 1;
}
