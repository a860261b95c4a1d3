// Tutorial 05 (the graph of LayerNorm): op nodes, gradcheck catching a broken backward. The numbers the tutorial prints,
// asserted (its guide-drift test is in test_tutorials.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/common/graph_dump.hpp"

namespace xg_test_tutorials_05_graph {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace tv = tutorial_values;
using Catch::Matchers::Contains;

TEST_CASE("Tutorial 05: the composed graph has 8 op nodes, the fused one 1, gradcheck catches a broken backward", "[tutorials]") {
    const tv::GraphComparison g = tv::graph_comparison();
    CHECK(g.composed_nodes == 8);
    CHECK(g.fused_nodes == 1);
    CHECK(g.composed_kept == 96);
    CHECK(g.fused_kept == 12);
    CHECK(g.max_out_diff < 1e-14);
    CHECK(g.max_grad_diff < 1e-13);
    CHECK_THAT(g.fused_text, Contains("layer_norm(x, gamma, beta)"));
    const tv::BrokenBackward b = tv::broken_backward_check();
    CHECK_FALSE(b.broken.ok);
    CHECK(b.fused.ok);
    CHECK_THAT(g.composed_dot, Contains("gamma\\n(4,)\\nrequires_grad"));  // leaves carry their names
    CHECK_THAT(g.fused_dot, Contains("x\\n(2, 3, 4)\\nrequires_grad"));
    CHECK_THAT(g.fused_dot, Contains("beta\\n(4,)"));
}

}  // namespace xg_test_tutorials_05_graph
