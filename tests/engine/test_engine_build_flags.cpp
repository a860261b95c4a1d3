// No fast-math: neither the build nor this translation unit may assume finite math.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "core/engine/random.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"

namespace xg_test_engine_build_flags {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace F = xg::nn::functional;
using xg::Array;
using xg::Shape;
using xg::Tensor;

TEST_CASE("no fast-math anywhere: not in the build, not in this translation unit", "[robustness]") {
#ifdef __FAST_MATH__
    FAIL("compiled with -ffast-math");
#endif
    // NaN checks (anomaly mode, clip_grad_norm) rely on isnan/isfinite, which fast-math removes.
    volatile double zero = 0.0;
    CHECK(std::isnan(zero / zero));
    namespace fs = std::filesystem;
    const fs::path root = XGRAD_SOURCE_DIR;
    std::vector<std::string> offenders;
    std::size_t scanned = 0;
    for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
        const std::string name = it->path().filename().string();
        if (it->is_directory() && (name.rfind("build", 0) == 0 || name == ".git")) {
            it.disable_recursion_pending();
            continue;
        }
        const std::string ext = it->path().extension().string();
        if (!it->is_regular_file() || !(name == "CMakeLists.txt" || ext == ".cmake" || ext == ".sh" || name == "run")) continue;
        ++scanned;
        std::ifstream in(it->path());
        std::string line;
        for (int n = 1; std::getline(in, line); ++n) {
            const std::string code = line.substr(0, line.find('#'));  // comments may warn about it
            for (const char* flag : {"-ffast-math", "-Ofast", "-funsafe-math-optimizations"}) {
                if (code.find(flag) != std::string::npos) offenders.push_back(fmt::format("{}:{}", it->path().string(), n));
            }
        }
    }
    INFO("offending lines: " << fmt::format("{}", fmt::join(offenders, ", ")));
    CHECK(scanned >= 3);
    CHECK(offenders.empty());
}

}  // namespace xg_test_engine_build_flags
