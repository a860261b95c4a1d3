// docs/derivatives.md must list every differentiable op and module, each row pointing at code
// that defines it and at a gradcheck test that exists. Adding an op without a row (or without a
// gradcheck) fails here; so does a row left behind after an op is removed or a test renamed.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace xg_test_layout_derivatives_table {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

namespace {

namespace fs = std::filesystem;
const fs::path kSource = XGRAD_SOURCE_DIR;

std::string read_text(const fs::path& path) {
    std::ifstream in(path);
    if (!in) FAIL("cannot read " << path.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

struct Row {
    std::string code_path, test_path, test_name, double_backward;
};

// Table rows look like: | `name` | forward | backward | [code](../path) | [file](../path) "test name" |
std::map<std::string, Row> table_rows(const std::string& markdown, std::vector<std::string>& duplicates) {
    static const std::regex row_re(
        R"(^\| `(\w+)` \|.*\| ([^|]+) \| \[[^\]]*\]\(\.\./([^)]+)\) \| \[[^\]]*\]\(\.\./([^)]+)\) \"([^\"]+)\" \|\s*$)");
    std::map<std::string, Row> rows;
    std::istringstream lines(markdown);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (!std::regex_match(line, m, row_re)) {
            if (line.rfind("| `", 0) == 0) FAIL("malformed row in docs/derivatives.md: " << line);
            continue;
        }
        if (!rows.emplace(m[1], Row{m[3], m[4], m[5], m[2]}).second) duplicates.push_back(m[1]);
    }
    return rows;
}

// Free functions returning a Tensor, declared at column 0 (methods are indented).
std::set<std::string> declared_ops(const fs::path& header) {
    static const std::regex op_re(R"(^Tensor (\w+)\()");
    std::set<std::string> names;
    std::istringstream lines(read_text(header));
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_search(line, m, op_re)) names.insert(m[1]);
    }
    return names;
}

// The modules a user can build. A shared base, named as PyTorch names them (RNNBase, RNNCellBase),
// has only a protected constructor and no forward of its own: the classes built on it have rows.
std::set<std::string> module_classes(const fs::path& header) {
    static const std::regex class_re(R"(^class (\w+) : public (Module|\w+Base)\b)");
    const auto is_base = [](const std::string& name) {
        return name.size() > 4 && name.compare(name.size() - 4, 4, "Base") == 0;
    };
    std::set<std::string> names;
    std::istringstream lines(read_text(header));
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_search(line, m, class_re) && !is_base(m[1])) names.insert(m[1]);
    }
    return names;
}

}  // namespace

TEST_CASE("derivatives table: every op and module has a row with code and a gradcheck test", "[docs]") {
    std::vector<std::string> duplicates;
    const auto rows = table_rows(read_text(kSource / "docs/derivatives.md"), duplicates);
    INFO("rows listed twice: " << Catch::Detail::stringify(duplicates));
    CHECK(duplicates.empty());

    std::set<std::string> ops = declared_ops(kSource / "core/ops/ops.hpp"), modules;
    for (const char* folder : {"nn", "distributed"}) {
        for (const auto& entry : fs::recursive_directory_iterator(kSource / folder)) {
            // nn/modules/init.hpp's initialisers overwrite storage outside the graph: nothing to differentiate.
            if (entry.path().extension() != ".hpp" || entry.path().filename() == "init.hpp") continue;
            ops.merge(declared_ops(entry.path()));
            modules.merge(module_classes(entry.path()));
        }
    }
    REQUIRE(ops.count("add") == 1);         // the parser sees core ops,
    REQUIRE(ops.count("layer_norm") == 1);  // fused ops
    REQUIRE(modules.count("LayerNorm") == 1);  // and modules

    std::set<std::string> declared = ops;
    declared.insert(modules.begin(), modules.end());
    for (const std::string& name : declared) {
        INFO("'" << name << "' is declared in core/ops/ops.hpp, nn/**/*.hpp or distributed/*.hpp but has no row in docs/derivatives.md");
        CHECK(rows.count(name) == 1);
    }

    for (const auto& [name, row] : rows) {
        INFO("row '" << name << "' of docs/derivatives.md");
        {
            INFO("no such op or Module subclass is declared (stale row?)");
            CHECK(declared.count(name) == 1);
        }
        const fs::path code = kSource / row.code_path;
        REQUIRE(fs::exists(code));
        // The code file defines the op ("name(") or the module's members ("Name::").
        const std::string code_text = read_text(code);
        const std::string definition = modules.count(name) ? name + "::" : name + "(";
        {
            INFO(row.code_path << " does not contain '" << definition << "'");
            CHECK(code_text.find(definition) != std::string::npos);
        }
        const fs::path test = kSource / row.test_path;
        {
            INFO("gradcheck tests live in tests/<area>/test_*_gradcheck.cpp, not " << row.test_path);
            const std::string suffix = "_gradcheck.cpp";
            CHECK(row.test_path.rfind("tests/", 0) == 0);
            CHECK((row.test_path.size() > suffix.size() &&
                   row.test_path.compare(row.test_path.size() - suffix.size(), suffix.size(), suffix) == 0));
        }
        REQUIRE(fs::exists(test));
        INFO(row.test_path << " has no TEST_CASE(\"" << row.test_name << "\"");
        CHECK(read_text(test).find("TEST_CASE(\"" + row.test_name + "\"") != std::string::npos);
    }
}

TEST_CASE("derivatives table: the double backward column matches the code and the gradgradcheck tests", "[docs]") {
    std::vector<std::string> duplicates;
    const auto rows = table_rows(read_text(kSource / "docs/derivatives.md"), duplicates);
    std::string gradgrad_tests;
    for (const auto& entry : fs::recursive_directory_iterator(kSource / "tests")) {
        const std::string file = entry.path().filename().string();
        const std::string suffix = "_gradgrad.cpp";  // the gradgradcheck tests of every area
        if (file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0)
            gradgrad_tests += read_text(entry.path());
    }
    std::size_t with_double_backward = 0;
    for (const auto& [name, row] : rows) {
        INFO("row '" << name << "' says '" << row.double_backward << "'");
        const std::string& kind = row.double_backward;
        if (kind == "ops" || kind == "twin") {
            ++with_double_backward;
            // ops: a BackwardContext backward in its file; twin: recomputed through_composed
            const std::string marker = kind == "ops" ? "BackwardContext" : "through_composed";
            CHECK(read_text(kSource / row.code_path).find(marker) != std::string::npos);
            INFO("no gradgradcheck test calls " << name << "(");
            CHECK(gradgrad_tests.find("::" + name + "(") != std::string::npos);
        } else if (kind.rfind("via ", 0) == 0) {
            if (kind == "via its ops") {
                INFO("a composed op claiming its ops' double backward is gradgradchecked");
                CHECK(gradgrad_tests.find("::" + name + "(") != std::string::npos);
                continue;
            }
            // "via X" chains (Conv1d via conv1d via conv2d) end at an op with ops or twin
            std::string base = kind.substr(4), base_kind;
            for (int depth = 0; depth < 4; ++depth) {
                REQUIRE(rows.count(base) == 1);
                base_kind = rows.at(base).double_backward;
                if (base_kind.rfind("via ", 0) != 0 || base_kind == "via its ops") break;
                base = base_kind.substr(4);
            }
            INFO("'via' ends at '" << base << "', which says '" << base_kind << "'");
            CHECK((base_kind == "ops" || base_kind == "twin" || base_kind == "via its ops"));
        } else {
            CHECK((kind == "none" || kind == "untested"));
        }
    }
    CHECK(with_double_backward >= 45);
}

}  // namespace xg_test_layout_derivatives_table
