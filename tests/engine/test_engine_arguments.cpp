// Arguments of the engine a new user got wrong and xgrad accepted (issue 13): element access past
// the end or with too few indices, an empty or non-finite uniform range; and a bad
// XGRAD_NUM_THREADS (issue 27). Each is an xg::Error naming the argument.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/engine/random.hpp"
#include "core/engine/threads.hpp"
#include "core/ops/ops.hpp"
#include "nn/nn.hpp"
#include "optim/training/data.hpp"
#include "optim/training/progress.hpp"

namespace xg_test_engine_arguments {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;
using Catch::Contains;

TEST_CASE("element access checks the rank and the range, negative indices count from the end", "[errors][arguments]") {
    const Tensor t({{1.0, 2.0}, {3.0, 4.0}});
    CHECK(t(1, 0) == 3.0);
    CHECK(t(-1, -1) == 4.0);  // t[-1][-1] in PyTorch
    CHECK(t(0, -2) == 1.0);
    // PyTorch: "index 5 is out of bounds for dimension 1 with size 2"
    CHECK_THROWS_WITH(t(0, 5), Contains("Tensor(): index 5 is out of bounds for axis 1 with size 2 (shape (2, 2))"));
    CHECK_THROWS_WITH(t(-3, 0), Contains("index -3 is out of bounds for axis 0 with size 2"));
    // t(1) used to read t(0, 1): one index per axis is required.
    CHECK_THROWS_WITH(t(1), Contains("Tensor(): 1 index for a 2-D tensor of shape (2, 2)"));
    CHECK_THROWS_WITH(t(0, 0, 0), Contains("3 indices for a 2-D tensor"));
    const Tensor s = scalar(2.5);
    CHECK(s() == 2.5);
    CHECK_THROWS_WITH(s(0), Contains("1 index for a 0-D tensor"));
    const Tensor v({1.0, 2.0, 3.0});
    CHECK(v(std::size_t{2}) == 3.0);  // unsigned indices work too
    CHECK_THROWS_WITH(v(3u), Contains("index 3 is out of bounds for axis 0 with size 3"));
}

TEST_CASE("uniform rejects an empty or non-finite range, as PyTorch's uniform_", "[errors][arguments]") {
    // PyTorch: "uniform_ expects to return a [from, to) range, but found from=1 > to=0"
    CHECK_THROWS_WITH(uniform({2}, 1.0, 0.0), Contains("uniform: low 1 must not exceed high 0"));
    CHECK_THROWS_WITH(uniform({2}, 0.0, std::nan("")), Contains("uniform: low 0 must not exceed high nan"));
    CHECK_THROWS_WITH(uniform({2}, 0.0, std::numeric_limits<double>::infinity()), Contains("finite"));
    const Tensor same = uniform({3}, 2.0, 2.0);  // an empty-width range gives its one value
    CHECK(same.value() == Array{2.0, 2.0, 2.0});
}

using Catch::Matchers::Contains;

namespace {

// Sets an environment variable for one scope and puts the old value back.
class ScopedEnv {
public:
    ScopedEnv(const char* name, const char* value) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        ::setenv(name, value, 1);
    }
    ~ScopedEnv() {
        if (old_) ::setenv(name_, old_->c_str(), 1); else ::unsetenv(name_);
    }
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
    const char* name_;
    std::optional<std::string> old_;
};

}  // namespace

// ---- item 3: XGRAD_NUM_THREADS took anything ("abc", "0", "5000": every core; "2abc": 2) -------

TEST_CASE("XGRAD_NUM_THREADS must be a whole number from 1 to 4096, else an error names it", "[issue27][threads]") {
    using detail::parse_thread_count;
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", nullptr) == 0);  // unset: the default
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", "") == 0);
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", "3") == 3);
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", " 2 ") == 2);
    CHECK(parse_thread_count("XGRAD_NUM_THREADS", "4096") == 4096);
    for (const char* bad : {"abc", "0", "-1", "5000", "1.5", "2abc", "+2", " ", "0x4", "99999999999"}) {
        INFO("XGRAD_NUM_THREADS='" << bad << "'");
        CHECK_THROWS_WITH(parse_thread_count("XGRAD_NUM_THREADS", bad),
                          Contains("XGRAD_NUM_THREADS") && Contains(std::string("'") + bad + "'") && Contains("1 to 4096"));
    }
    {  // what get_num_threads starts from, read from the environment as it reads it
        const ScopedEnv env("XGRAD_NUM_THREADS", "2abc");
        CHECK_THROWS_WITH(detail::thread_count_from_environment(), Contains("XGRAD_NUM_THREADS") && Contains("'2abc'"));
    }
    {
        const ScopedEnv env("XGRAD_NUM_THREADS", "3");
        CHECK(detail::thread_count_from_environment() == 3);
    }
    {
        const ScopedEnv env("XGRAD_NUM_THREADS", "");
        const ScopedEnv omp("OMP_NUM_THREADS", "2,1");  // libgomp's list: its first entry
        CHECK(detail::thread_count_from_environment() == 2);
    }
    CHECK_THROWS_WITH(set_num_threads(5000), Contains("set_num_threads") && Contains("5000"));
    CHECK_THROWS_WITH(set_num_threads(0), Contains("set_num_threads") && Contains("got 0"));
}

}  // namespace xg_test_engine_arguments
