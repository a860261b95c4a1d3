// `ctest -L float32`: the float32 twins of nn/ (every tests/<area>/test_<area>_float32.cpp that
// registers its list in tests/support/float32_nn_twins.hpp) reach every op nn/ records, and no node
// of their float32 graphs is float64 (a float64 node there is a leak: a constant or state made
// without the input's dtype promotes everything after it).
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/float32_nn_twins.hpp"
#include "tests/support/recorded_op_names.hpp"

namespace xg_test_modules_coverage_float32 {

using xg::Tensor;

// The op names nn/ records, and distributed/ (the modules that talk MPI); where record() is given a
// variable, the names its callers pass.
std::set<std::string> nn_recorded_op_names(std::vector<std::string>& unknown_sites) {
    const xg_test_support::NamesFromCallers names_from_callers = {
        {"nn/functional/group_norm.cpp: op", {"group_norm", "instance_norm"}},
    };
    return xg_test_support::recorded_op_names({"nn", "distributed"}, names_from_callers, unknown_sites);
}

// Every op in the graphs below `outputs` (not the leaves), and those whose node is not float32.
void collect_ops(const std::vector<Tensor>& outputs, std::set<std::string>& ops, std::set<std::string>& float64_ops) {
    xg::test::detail::for_each_node(outputs, [&](const xg::Node& n) {
        if (n.is_leaf()) return;
        ops.insert(n.op);
        if (n.dtype != xg::kFloat32) float64_ops.insert(n.op);
    });
}

TEST_CASE("float32 twins: they reach every op nn/ records, and their float32 graphs hold no float64 node",
          "[float32][coverage]") {
    std::vector<std::string> unknown_sites;
    const std::set<std::string> recorded = nn_recorded_op_names(unknown_sites);
    xg_test_support::check_record_sites_known(unknown_sites, "in nn/ ");
    REQUIRE(recorded.count("layer_norm") == 1);  // the scan sees the fused ops,
    REQUIRE(recorded.count("gelu_tanh") == 1);   // both names of a conditional
    REQUIRE(recorded.count("instance_norm") == 1);  // and names passed by callers

    std::set<std::string> reached;
    for (const auto& [area, make] : xg_test_support::nn_twin_registry()) {
        for (const xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
            const xg::KernelTierGuard guard(tier);
            for (const xg_test_support::NnTwin& twin : make()) {
                const std::vector<Tensor> inputs32 = xg::test::float32_copies(twin.inputs64);
                std::set<std::string> float64_ops;
                const std::vector<Tensor> outputs = twin.f(inputs32);
                collect_ops(outputs, reached, float64_ops);
                INFO(area << ": " << twin.name << ": ops with a float64 result in the float32 graph: "
                          << Catch::Detail::stringify(float64_ops));
                CHECK(float64_ops.empty());
                // the gradients under create_graph (the fused ops' composed twins, recorded) are float32 too;
                // the seeds require a gradient, so that products with constants are recorded and seen
                std::vector<Tensor> roots, seeds, wrt;
                for (const Tensor& y : outputs) {
                    if (y.requires_grad()) roots.push_back(y), seeds.push_back(xg::Tensor(xg::ones_like(y).value(), xg::kFloat32, true));
                }
                for (const Tensor& x : inputs32) {
                    if (x.requires_grad()) wrt.push_back(x);
                }
                if (roots.empty() || wrt.empty()) continue;
                xg::GradOptions options;
                options.create_graph = true;
                options.allow_unused = true;
                std::set<std::string> gradient_ops, float64_gradient_ops;
                collect_ops(xg::grad(roots, wrt, seeds, options), gradient_ops, float64_gradient_ops);
                INFO(area << ": " << twin.name << ": ops with a float64 result in the float32 create_graph gradients: "
                          << Catch::Detail::stringify(float64_gradient_ops));
                CHECK(float64_gradient_ops.empty());
            }
        }
    }
    REQUIRE(xg_test_support::nn_twin_registry().size() >= 11);  // the areas' files registered their twins
    // sync_batch_norm (distributed/sync_batchnorm.cpp) is built only with MPI and runs under mpirun
    // (ctest -L distributed); this program cannot run it.
    xg_test_support::check_recorded_ops_reached(
        recorded, reached, "is recorded in nn/ but no float32 twin reaches it: add one to its area's tests/<area>/test_<area>_float32.cpp",
        {"sync_batch_norm"});
}

// Issue 41: no nn op reads a float32 or bfloat16 tensor as float64 (a float64 mirror beside its
// narrow storage, Node::value_mirror), forward or first-order backward, on either tier: every twin's
// graph, its leaves and its gradients hold storage of the inputs' dtype only, and every node of the
// graph has that dtype.
TEST_CASE("float32 twins: no nn op makes a float64 mirror of a float32 or bfloat16 tensor", "[float32][bfloat16][coverage]") {
    for (const xg::Dtype dtype : {xg::kFloat32, xg::kBFloat16}) {
        std::set<std::string> mirrored, widened;
        for (const auto& [area, make] : xg_test_support::nn_twin_registry()) {
            for (const xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
                const xg::KernelTierGuard guard(tier);
                for (const xg_test_support::NnTwin& twin : make()) {
                    std::vector<Tensor> inputs;
                    for (const Tensor& x : twin.inputs64) inputs.emplace_back(x.value(), dtype, x.requires_grad());
                    const std::vector<Tensor> outputs = twin.f(inputs);
                    std::vector<Tensor> roots, seeds, wrt;
                    for (const Tensor& y : outputs) {
                        if (y.requires_grad()) roots.push_back(y), seeds.push_back(xg::ones(y.shape(), dtype));
                    }
                    for (const Tensor& x : inputs) {
                        if (x.requires_grad()) wrt.push_back(x);
                    }
                    std::vector<Tensor> all = outputs;
                    if (!roots.empty() && !wrt.empty()) {
                        const std::vector<Tensor> grads = xg::grad(roots, wrt, seeds, {true, false, true});
                        all.insert(all.end(), grads.begin(), grads.end());
                    }
                    xg::test::detail::for_each_node(all, [&](const xg::Node& n) {
                        if (n.value_mirror != xg::Node::Mirror::None || n.grad_mirror != xg::Node::Mirror::None) {
                            mirrored.insert(area + ": " + twin.name);
                        }
                        if (!n.is_leaf() && n.dtype != dtype) widened.insert(area + ": " + twin.name + " (" + n.op + ")");
                    });
                }
            }
        }
        INFO(xg::dtype_name(dtype) << " twins whose graphs hold a float64 mirror: " << Catch::Detail::stringify(mirrored));
        CHECK(mirrored.empty());
        INFO(xg::dtype_name(dtype) << " twins whose graphs hold a node of another dtype: " << Catch::Detail::stringify(widened));
        CHECK(widened.empty());
    }
}

}  // namespace xg_test_modules_coverage_float32
