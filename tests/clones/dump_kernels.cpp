// Writes the outputs and gradients of the kernels that have AVX2 clones (layer_norm, rms_norm,
// batch_norm, group_norm; nn/fast/kernel_primitives.hpp; layer_norm and rms_norm in float32 too) and
// the parameters and moments after Adam and AdamW steps (optim/adam.cpp, float64 and float32) to
// the file named by argv[1], as raw doubles.
// Built twice - against the library as it is, and with those kernels compiled without clones - so
// that compare_dumps.cmake can show that both versions round identically (ctest kernels.*).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/engine/random.hpp"
#include "nn/functional/functional.hpp"
#include "optim/adam.hpp"

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;

namespace {

void put(std::FILE* f, const Array& a) { std::fwrite(a.data(), sizeof(double), a.size(), f); }

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <output file>\n", argv[0]);
        return 2;
    }
    std::FILE* f = std::fopen(argv[1], "wb");
    if (f == nullptr) {
        std::perror(argv[1]);
        return 1;
    }
    xg::manual_seed(3);
    // Small shapes with tails, and outputs of 4 MiB or more (the streaming-store path).
    for (const Shape& s : {Shape{37, 83}, Shape{5, 7, 19}, Shape{64, 768}, Shape{1030, 1020}, Shape{65, 16, 1030}}) {
        const std::size_t channels = s[1], width = s.back();
        Tensor x(xg::randn(s).value() * 3.0 + 1.0, true);
        Tensor w = xg::randn({channels}, true), b = xg::randn({channels}, true);
        Tensor wl = xg::randn({width}, true), bl = xg::randn({width}, true);
        Tensor running_mean = xg::zeros({channels}), running_var = xg::ones({channels});
        const Tensor dy = xg::randn(s);
        const std::int64_t groups = channels % 2 == 0 ? 2 : 1;
        for (int op = 0; op < 5; ++op) {
            for (Tensor* t : {&x, &w, &b, &wl, &bl}) t->zero_grad();
            const Tensor y = op == 0   ? F::layer_norm(x, {width}, wl, bl, 1e-5)
                             : op == 1 ? F::rms_norm(x, {width}, wl, 1e-6)
                             : op == 2 ? F::batch_norm(x, running_mean, running_var, w, b, true, 0.1, 1e-5)
                             : op == 3 ? F::batch_norm(x, running_mean, running_var, w, b, false, 0.1, 1e-5)
                                       : F::group_norm(x, groups, w, b, 1e-5);
            y.backward(dy);
            put(f, y.value());
            put(f, x.grad_value());
            if (op < 2) {
                put(f, wl.grad_value());
            } else {
                put(f, w.grad_value());
                put(f, b.grad_value());
                if (op < 4) put(f, running_mean.value());
                if (op < 4) put(f, running_var.value());
            }
        }
        // layer_norm and rms_norm in float32: their float kernels are clones too (native float32 nodes)
        Tensor x32 = x.to(xg::kFloat32).detach().requires_grad_(), wl32 = wl.to(xg::kFloat32).detach().requires_grad_();
        Tensor bl32 = bl.to(xg::kFloat32).detach().requires_grad_();
        const Tensor dy32 = dy.to(xg::kFloat32);
        for (int op = 0; op < 2; ++op) {
            for (Tensor* t : {&x32, &wl32, &bl32}) t->zero_grad();
            const Tensor y = op == 0 ? F::layer_norm(x32, {width}, wl32, bl32, 1e-5) : F::rms_norm(x32, {width}, wl32, 1e-6);
            y.backward(dy32);
            put(f, xg::to_float64_array(y.values<float>()));
            put(f, xg::to_float64_array(x32.grad_values<float>()));
            put(f, xg::to_float64_array(wl32.grad_values<float>()));
        }
    }
    // Adam (AMSGrad, L2 decay) and AdamW, 3 steps, on 1031 values (the vector loops' tails)
    for (const xg::Dtype dtype : {xg::kFloat64, xg::kFloat32}) {
        for (int decoupled = 0; decoupled < 2; ++decoupled) {
            std::vector<Tensor> p = {Tensor(xg::randn({1031}).value(), dtype, true)};
            std::unique_ptr<xg::optim::Optimizer> adam;
            if (decoupled == 1) adam = std::make_unique<xg::optim::AdamW>(p, xg::optim::AdamWOptions(0.05));
            else adam = std::make_unique<xg::optim::Adam>(p, xg::optim::AdamOptions(0.05).weight_decay(0.01).amsgrad(true));
            for (int step = 0; step < 3; ++step) {
                p[0].set_grad(xg::randn({1031}).value());
                adam->step();
            }
            for (const auto& [key, value] : adam->state_dict()) put(f, value);
            put(f, p[0].value());
        }
    }
    // The dispatcher picks the AVX2 clone only where the CPU has AVX2; elsewhere both builds run
    // the SSE2 code and the comparison proves nothing about the clones: say which case this was.
    std::printf("AVX2 clones %s\n", __builtin_cpu_supports("avx2") ? "exercised (this CPU has AVX2)"
                                                                    : "not exercised: this CPU has no AVX2");
    return std::fclose(f) == 0 ? 0 : 1;
}
