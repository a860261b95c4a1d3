// `ctest -L float32`: the float32 twins of nn/ (every tests/<area>/test_<area>_float32.cpp that
// registers its list in tests/support/float32_nn_twins.hpp) reach every op nn/ records, and no node
// of their float32 graphs is float64 (a float64 node there is a leak: a constant or state made
// without the input's dtype promotes everything after it).
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/support/float32_nn_twins.hpp"

namespace xg_test_modules_coverage_float32 {

namespace fs = std::filesystem;
using xg::Tensor;

// The source tree: this file is tests/modules/ in it (CMake compiles it by its absolute path).
fs::path source_dir() {
#ifdef XGRAD_SOURCE_DIR
    return fs::path(XGRAD_SOURCE_DIR);
#else
    return fs::path(__FILE__).parent_path().parent_path().parent_path();
#endif
}

std::string read_text(const fs::path& path) {
    std::ifstream in(path);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// The first argument of every record( call in `text` (as tests/engine/test_engine_create_graph_gradgrad.cpp reads them).
std::vector<std::string> record_first_arguments(const std::string& text) {
    std::vector<std::string> args;
    static const std::regex call(R"((^|[^\w])record\()");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
        const std::size_t start = static_cast<std::size_t>(it->position(0) + it->length(0));
        int depth = 0;
        std::size_t end = start;
        for (; end < text.size(); ++end) {
            const char ch = text[end];
            if (ch == '(') ++depth;
            if ((ch == ',' || ch == ')') && depth == 0) break;
            if (ch == ')') --depth;
        }
        std::string arg = std::regex_replace(text.substr(start, end - start), std::regex(R"(\s+)"), " ");
        arg = std::regex_replace(arg, std::regex(R"(^ | $)"), "");
        if (!arg.empty()) args.push_back(arg);  // empty: "record()" in a comment
    }
    return args;
}

// The op names nn/ records: string literals given to record() (both branches of a `cond ? "a" : "b"`)
// and the names callers pass where record() is given a variable.
std::set<std::string> nn_recorded_op_names(std::vector<std::string>& unknown_sites) {
    const std::map<std::string, std::set<std::string>> names_from_callers = {
        {"nn/functional/group_norm.cpp: op", {"group_norm", "instance_norm"}},
    };
    static const std::regex literal(R"re("(\w+)")re"), only_literals(R"re(^("\w+"|[\w.]+ \? "\w+" : "\w+")$)re");
    std::set<std::string> names;
    std::vector<fs::path> scanned;  // nn/ and distributed/ (the modules that talk MPI)
    for (const char* folder : {"nn", "distributed"}) {
        for (const auto& entry : fs::recursive_directory_iterator(source_dir() / folder)) scanned.push_back(entry.path());
    }
    for (const fs::path& path : scanned) {
        if (path.extension() != ".cpp") continue;
        const std::string file = fs::relative(path, source_dir()).generic_string();
        for (const std::string& arg : record_first_arguments(read_text(path))) {
            if (std::regex_match(arg, only_literals)) {
                for (auto m = std::sregex_iterator(arg.begin(), arg.end(), literal); m != std::sregex_iterator(); ++m) {
                    names.insert((*m)[1]);
                }
                continue;
            }
            const auto known = names_from_callers.find(file + ": " + arg);
            if (known == names_from_callers.end()) {
                unknown_sites.push_back(file + ": " + arg);
            } else {
                names.insert(known->second.begin(), known->second.end());
            }
        }
    }
    return names;
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
    {
        INFO("record() calls in nn/ whose op name is neither a literal nor listed in names_from_callers: "
             << Catch::Detail::stringify(unknown_sites));
        CHECK(unknown_sites.empty());
    }
    REQUIRE(recorded.count("layer_norm") == 1);  // the scan sees the fused ops,
    REQUIRE(recorded.count("gelu_tanh") == 1);   // both names of a conditional
    REQUIRE(recorded.count("instance_norm") == 1);  // and names passed by callers

    std::set<std::string> reached;
    for (const auto& [area, make] : xg_test_support::nn_twin_registry()) {
        for (const xg::KernelTier tier : {xg::KernelTier::reference, xg::KernelTier::fast}) {
            const xg::KernelTierGuard guard(tier);
            for (const xg_test_support::NnTwin& twin : make()) {
                std::vector<Tensor> inputs32;
                for (const Tensor& t : twin.inputs64) inputs32.emplace_back(t.value(), xg::kFloat32, t.requires_grad());
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
    const std::set<std::string> run_elsewhere{"sync_batch_norm"};
    for (const std::string& op : run_elsewhere) CHECK(recorded.count(op) == 1);  // still recorded under that name
    for (const std::string& op : recorded) {
        if (run_elsewhere.count(op) != 0) continue;
        INFO("op '" << op << "' is recorded in nn/ but no float32 twin reaches it: add one to its area's "
                       "tests/<area>/test_<area>_float32.cpp");
        CHECK(reached.count(op) == 1);
    }
}

}  // namespace xg_test_modules_coverage_float32
