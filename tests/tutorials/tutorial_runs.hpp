// The tutorial programs as the tests run them: a command line's exit code and output, a program's
// quick run, and the values a program recorded in its quick run (xg::tutorial::ValuesForTests), so
// that a test of a tutorial's quick-run numbers reads the values of the run its guide-drift test
// made (tests/tutorials/test_tutorials.cpp) instead of training the same models a second time.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include <catch2/catch.hpp>

#include "tutorials/common/tutorial.hpp"

namespace xg::test {

struct ProgramRun {
    int exit_code = -1;
    std::string output;
};

/// Runs a shell command line and returns its exit code and standard output.
inline ProgramRun run_command(const std::string& cmd) {
    FILE* pipe = popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    ProgramRun r;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) r.output.append(buf, n);
    const int status = pclose(pipe);
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

inline std::string tutorial_program_path(const std::string& program) {
    return std::string(XGRAD_TUTORIAL_BIN_DIR) + "/" + program;
}

/// Where a run of `program` made by run_quick() leaves the values it recorded:
/// <XGRAD_TUTORIAL_OUT_DIR>/<program>.values (only programs that record values write it).
inline std::string quick_run_values_path(const std::string& program) {
    return std::string(XGRAD_TUTORIAL_OUT_DIR) + "/" + program + ".values";
}

/// `program` in its quick settings, as the guide-drift test runs it: --out XGRAD_TUTORIAL_OUT_DIR,
/// no input, standard error (progress bars) dropped, and XGRAD_TUTORIAL_VALUES naming
/// quick_run_values_path(program).
inline ProgramRun run_quick(const std::string& program) {
    std::filesystem::create_directories(XGRAD_TUTORIAL_OUT_DIR);
    return run_command("XGRAD_TUTORIAL_VALUES='" + quick_run_values_path(program) + "' '" + tutorial_program_path(program) +
                       "' --out '" + XGRAD_TUTORIAL_OUT_DIR + "' < /dev/null 2>/dev/null");
}

/// Rows "key v1 v2 ..." of a values file, by key.
using RecordedValues = std::map<std::string, std::vector<double>>;

/// The values in `path`, when they are current: the file is at least as new as `program`'s binary (a
/// rebuilt program, or one relinked against a changed library, is run again) and was written
/// under this process's OpenBLAS kernel and kernel tier (xg::tutorial::kernel_settings()), so that
/// the second pass of scripts/setup.sh test reads the values of its own run. Else false.
inline bool read_current_values(const std::string& program, const std::string& path, RecordedValues& values) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) return false;
    const auto binary_time = fs::last_write_time(tutorial_program_path(program), ec);
    if (ec || fs::last_write_time(path, ec) < binary_time || ec) return false;
    std::ifstream in(path);
    std::string settings;
    if (!std::getline(in, settings) || settings != xg::tutorial::kernel_settings()) return false;
    values.clear();
    for (std::string line; std::getline(in, line);) {
        std::istringstream row(line);
        std::string key;
        row >> key;
        std::vector<double>& v = values[key];
        for (double x; row >> x;) v.push_back(x);
    }
    return true;
}

/// The values `program` recorded in its quick run: those of the run its guide-drift test made,
/// when they are current (read_current_values; ctest starts the test that asks after the drift
/// test: DEPENDS in tests/CMakeLists.txt), else those of a quick run made here. `reused` says which.
inline RecordedValues quick_run_values(const std::string& program, bool& reused) {
    RecordedValues values;
    const std::string path = quick_run_values_path(program);
    reused = read_current_values(program, path, values);
    if (reused) return values;
    const ProgramRun run = run_quick(program);
    INFO("a quick run of " << program << " made here; its output:\n" << run.output);
    REQUIRE(run.exit_code == 0);
    REQUIRE(read_current_values(program, path, values));
    return values;
}

/// The row `key` of `values`.
inline const std::vector<double>& recorded(const RecordedValues& values, const std::string& key) {
    const auto it = values.find(key);
    INFO("the program recorded no row " << key);
    REQUIRE(it != values.end());
    return it->second;
}

}  // namespace xg::test
