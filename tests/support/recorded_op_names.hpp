// The op names the library records, read from its source: the coverage tests compare them with
// the ops their twins reach, so that a new op without a test fails by name. Reading the source
// (rather than a list kept by hand) is what makes a forgotten op show.
#pragma once

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace xg_test_support {

/// The source tree, as CMake gives it to the test programs that read it.
inline std::filesystem::path source_root() { return std::filesystem::path(XGRAD_SOURCE_DIR); }

inline std::string read_source_text(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) FAIL("cannot read " << path.string());
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// The first argument of every record( call in `text` (up to the first ',' or ')' at its own depth),
/// white space folded: the op's name as the node will carry it.
inline std::vector<std::string> record_first_arguments(const std::string& text) {
    std::vector<std::string> args;
    static const std::regex call(R"((^|[^\w])record\()");
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
        const std::size_t start = static_cast<std::size_t>(it->position(0) + it->length(0));
        if (text.compare(start, 11, "std::string") == 0) continue;  // record's own declaration or definition
        std::size_t end = start;
        for (int depth = 0; end < text.size(); ++end) {
            const char ch = text[end];
            if (depth == 0 && (ch == ',' || ch == ')')) break;
            depth += ch == '(' ? 1 : ch == ')' ? -1 : 0;
        }
        const std::string arg = std::regex_replace(std::regex_replace(text.substr(start, end - start), std::regex(R"(\s+)"), " "),
                                                   std::regex(R"(^ | $)"), "");
        if (!arg.empty()) args.push_back(arg);  // empty: "record()" in a comment
    }
    return args;
}

/// For record() sites whose op name is a variable, keyed "<file>: <argument>": the names their
/// callers pass.
using NamesFromCallers = std::map<std::string, std::set<std::string>>;

/// The op names recorded by the .cpp files below `folders` (relative to the source tree): string
/// literals given to record() (both branches of a `cond ? "a" : "b"`) and, where record() is given
/// a variable, the names `names_from_callers` lists for that site. Sites it lists nothing for are
/// appended to `unknown_sites`.
inline std::set<std::string> recorded_op_names(const std::vector<std::string>& folders, const NamesFromCallers& names_from_callers,
                                               std::vector<std::string>& unknown_sites) {
    namespace fs = std::filesystem;
    static const std::regex literal(R"re("(\w+)")re"), only_literals(R"re(^("\w+"|[\w.]+ \? "\w+" : "\w+")$)re");
    std::set<std::string> names;
    for (const std::string& folder : folders) {
        for (const auto& entry : fs::recursive_directory_iterator(source_root() / folder)) {
            if (entry.path().extension() != ".cpp") continue;
            const std::string file = fs::relative(entry.path(), source_root()).generic_string();
            for (const std::string& arg : record_first_arguments(read_source_text(entry.path()))) {
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
    }
    return names;
}

/// The forward op names of the FlatGather maps built by the .cpp files below `folders` (the scatter
/// node of each records "<op>_backward").
inline std::set<std::string> flat_gather_op_names(const std::vector<std::string>& folders) {
    namespace fs = std::filesystem;
    static const std::regex flat_gather(R"re(FlatGather\{"(\w+)")re");
    std::set<std::string> names;
    for (const std::string& folder : folders) {
        for (const auto& entry : fs::recursive_directory_iterator(source_root() / folder)) {
            if (entry.path().extension() != ".cpp") continue;
            const std::string text = read_source_text(entry.path());
            for (auto m = std::sregex_iterator(text.begin(), text.end(), flat_gather); m != std::sregex_iterator(); ++m) {
                names.insert((*m)[1]);
            }
        }
    }
    return names;
}

/// Every record() site was understood: none is left in `unknown_sites` (`where` names the folders
/// scanned, for the message).
inline void check_record_sites_known(const std::vector<std::string>& unknown_sites, const std::string& where) {
    INFO("record() calls " << where << "whose op name is neither a literal nor listed in names_from_callers: "
                           << Catch::Detail::stringify(unknown_sites));
    CHECK(unknown_sites.empty());
}

/// Every op of `recorded` is in `reached`, but those of `run_elsewhere` (ops this program cannot
/// run), which must still be recorded under that name. `missing` completes "op '<name>' " in the
/// message of an op not reached: where it is recorded and what to add.
inline void check_recorded_ops_reached(const std::set<std::string>& recorded, const std::set<std::string>& reached,
                                       const std::string& missing, const std::set<std::string>& run_elsewhere = {}) {
    for (const std::string& op : run_elsewhere) CHECK(recorded.count(op) == 1);  // still recorded under that name
    for (const std::string& op : recorded) {
        if (run_elsewhere.count(op) != 0) continue;
        INFO("op '" << op << "' " << missing);
        CHECK(reached.count(op) == 1);
    }
}

}  // namespace xg_test_support
