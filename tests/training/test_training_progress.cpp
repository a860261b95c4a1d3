// The progress bar (one final line when not a terminal, redrawn in place on one) and the CSV
// metrics log (header, one flushed row per call, appended on resume).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "core/ops/ops.hpp"
#include "optim/clip.hpp"
#include "optim/training/progress.hpp"

namespace xg_test_training_progress {  // one namespace per test file: the files are compiled in batches (tests/CMakeLists.txt)

using namespace xg;

using namespace xg::optim;

namespace {

std::string read_all(std::FILE* f) {
    std::fflush(f);
    std::rewind(f);
    std::string out;
    char buf[256];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    return out;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

}  // namespace

TEST_CASE("progress bar: one final line when not a terminal", "[progress]") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    {
        ProgressBar bar(4, "epoch 1/2", ProgressBar::Mode::quiet, f);
        bar.update(1.0);
        bar.update(2.0);
        CHECK(read_all(f).empty());
        bar.update(3.0);
        bar.update(4.0);
        CHECK(bar.mean_loss() == 2.5);
        bar.finish("test acc 0.5");
    }
    const std::string out = read_all(f);
    CHECK(out.find('\r') == std::string::npos);
    CHECK(out.find("epoch 1/2 [####################] 4/4") == 0);
    CHECK(out.find("loss 2.5000  test acc 0.5\n") != std::string::npos);
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    std::fclose(f);
}

TEST_CASE("progress bar: redraws in place on a terminal", "[progress]") {
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    {
        ProgressBar bar(3, "train", ProgressBar::Mode::terminal, f);
        bar.update(0.5);  // drawn: the first redraw is due only after 100 ms, but the last always is
        bar.update(0.5);
        bar.update(0.5);
    }  // the destructor finishes the line
    const std::string out = read_all(f);
    CHECK(out.rfind("\rtrain [####################] 3/3", 0) == 0);
    CHECK(out.find("it/s") != std::string::npos);
    CHECK(std::regex_search(out, std::regex("took \\d+:\\d\\d")));  // the duration itself depends on the machine's load
    CHECK(out.back() == '\n');
    std::fclose(f);
    CHECK(format_duration(61) == "1:01");
    CHECK(format_duration(3725) == "1:02:05");
}

TEST_CASE("CSV metrics log: header, one flushed row per call, append on resume", "[progress]") {
    // per process: two suites (Release and ASan, or two checkouts) may run at once on one machine
    const std::string path =
        (std::filesystem::temp_directory_path() / ("xgrad_test_metrics_" + std::to_string(::getpid()) + ".csv")).string();
    {
        CsvLogger log(path, {"epoch", "train_loss", "test_acc"});
        log.log({1, 0.5, 0.8125});
        CHECK(read_file(path) == "epoch,train_loss,test_acc\n1,0.5,0.8125\n");  // flushed already
        log.log({2, 0.1 + 0.2, 0.9});
        CHECK_THROWS_WITH(log.log({1, 2}), Catch::Contains("2 values for the 3 columns"));
    }
    {
        CsvLogger resumed(path, {"epoch", "train_loss", "test_acc"}, true);
        resumed.log({3, 0.25, 0.95});
    }
    CHECK(read_file(path) == "epoch,train_loss,test_acc\n1,0.5,0.8125\n2,0.30000000000000004,0.9\n3,0.25,0.95\n");
    CHECK_THROWS_WITH(CsvLogger(path, {"step", "loss"}, true), Catch::Contains("has header"));
    CHECK_THROWS_WITH(CsvLogger(path, {"a,b"}), Catch::Contains("comma"));
    std::filesystem::remove(path);
}

}  // namespace xg_test_training_progress
