// The main job as a lesson: runs every tutorial program in the order tutorials/CMakeLists.txt lists
// them (the list CMake writes to <build>/tutorials/tutorials.list), saves each one's whole output
// to <out>/<name>.txt, and prints, per program, a banner (title, article examples, guide) and what
// a learner should take away: its sections, its "=>" verdicts and the notes on where the articles
// say otherwise. It ends with a summary table and writes the offline HTML report (report.cpp).
//
//   xgrad_run_tutorials                      run them all (what `cmake --build build --target tutorials` does)
//   xgrad_run_tutorials --only 05_graph      run some (repeatable)
//   xgrad_run_tutorials --report-only        no runs: the report from the outputs <out> holds
// Also: --list FILE, --bin DIR, --out DIR, --report DIR, --source DIR (defaults: this build tree).
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tutorials/common/tutorial.hpp"
#include "tutorials/runner/report.hpp"

namespace fs = std::filesystem;
using namespace xg::tutorial;
using namespace xg::tutorial::runner;

namespace {

struct Options {
    std::string list = XGRAD_TUTORIAL_BIN_DIR "/tutorials.list";
    std::string bin = XGRAD_TUTORIAL_BIN_DIR;
    std::string out = XGRAD_TUTORIAL_OUT_DIR;
    std::string report = XGRAD_TUTORIAL_BIN_DIR "/report";
    std::string source = XGRAD_TUTORIAL_SOURCE_DIR;
    std::set<std::string> only;
    bool report_only = false;
};

[[noreturn]] void usage_error(const std::string& why) {
    fmt::print(stderr,
               "xgrad_run_tutorials: {}\nusage: xgrad_run_tutorials [--only NAME]... [--report-only] [--list FILE] [--bin DIR] "
               "[--out DIR] [--report DIR] [--source DIR]\n",
               why);
    std::exit(2);
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) usage_error(a + " needs a value");
            return argv[++i];
        };
        if (a == "--only") o.only.insert(value());
        else if (a == "--report-only") o.report_only = true;
        else if (a == "--list") o.list = value();
        else if (a == "--bin") o.bin = value();
        else if (a == "--out") o.out = value();
        else if (a == "--report") o.report = value();
        else if (a == "--source") o.source = value();
        else usage_error("unknown argument '" + a + "'");
    }
    return o;
}

struct Command {
    int exit_code = -1;
    std::string output;
};

Command run_shell(const std::string& cmd) {
    Command c;
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) return c;
    char buf[4096];
    for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) c.output.append(buf, n);
    const int status = pclose(pipe);
    c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return c;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string after(const std::string& line, const std::string& key) {
    const auto at = line.find(key);
    if (at == std::string::npos) return "";
    const auto b = line.find_first_not_of(' ', at + key.size());
    return b == std::string::npos ? "" : line.substr(b);
}

// Title, article examples and guide from the program's --help (tutorial::usage() writes them).
void describe(TutorialRun& r, const std::string& program) {
    r.title = r.name;
    r.ids = "-";
    std::istringstream help(run_shell(quoted(program) + " --help 2>/dev/null").output);
    std::vector<std::string> lines;
    for (std::string line; std::getline(help, line);) lines.push_back(line);
    for (std::size_t i = 0; i < lines.size(); ++i) {
        if (const auto ids = after(lines[i], "article examples:"); !ids.empty()) {
            r.ids = ids;
            if (i > 0 && lines[i - 1].rfind("usage:", 0) != 0) r.title = lines[i - 1];
        }
        if (const auto guide = after(lines[i], "guide:"); !guide.empty()) r.guide = guide.substr(0, guide.find(' '));
    }
}

// Progress bars redraw with '\r' (and clear the rest of the line with ESC [K): the line keeps what
// the last redraw showed, without the terminal's control sequences.
std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        if (const auto cr = line.find_last_of('\r'); cr != std::string::npos) line = line.substr(cr + 1);
        for (std::size_t esc; (esc = line.find('\033')) != std::string::npos;) {
            std::size_t end = esc + 1;
            if (end < line.size() && line[end] == '[') {
                while (++end < line.size() && !(line[end] >= '@' && line[end] <= '~')) {
                }
            }
            line.erase(esc, std::min(end + 1, line.size()) - esc);
        }
        lines.push_back(line);
    }
    return lines;
}

// The output as saved: what the terminal finally showed, one line each (no redraws).
std::string saved_text(const std::vector<std::string>& lines) {
    std::string s;
    for (const auto& line : lines) s += line + "\n";
    return s;
}

// What the terminal shows of a program's output: its sections, verdicts and article notes.
bool is_lesson_line(const std::string& line) {
    if (line.rfind('[', 0) == 0) return true;
    const auto b = line.find_first_not_of(' ');
    if (b == std::string::npos) return false;
    for (const char* prefix : {"=> ", "Article:", "Exact:", "Note:"}) {
        if (line.compare(b, std::char_traits<char>::length(prefix), prefix) == 0) return true;
    }
    return false;
}

std::string rule(const std::string& text) {
    const std::string head = "--- " + text + " ";
    return head + std::string(kColumns > display_width(head) ? kColumns - display_width(head) : 3, '-');
}

std::string cut(const std::string& s, std::size_t width) {
    if (display_width(s) <= width) return s;
    std::string out;
    for (std::size_t i = 0, n = 0; i < s.size() && n + 3 < width; ++i) {
        out += s[i];
        n += (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    }
    while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80) out.pop_back();  // no half character
    if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80) != 0) out.pop_back();
    return out + "...";
}

void run_one(TutorialRun& r, const std::string& program, const std::string& args, const Options& o) {
    // The main job stays under 300 lines (issue 30): the banner is the rule and one line of article
    // examples and guide (two when they do not fit); time and output file are in the summary.
    fmt::print("{}\n", rule(r.title));
    const std::string guide = "guide: " + (r.guide.empty() ? std::string("-") : r.guide);
    const std::string ids = "  article examples: " + r.ids;
    if (display_width(ids) + 3 + display_width(guide) <= kColumns) fmt::print("{} | {}\n", ids, guide);
    else fmt::print("{}\n  {}\n", ids, guide);
    std::fflush(stdout);
    const double start = now_seconds();
    const std::string cmd = quoted(program) + (args.empty() ? "" : " " + args) + " --out " + quoted(o.out) + " < /dev/null 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    std::string text, pending;
    std::size_t verdict_indent = std::string::npos;  // while a wrapped "=>" verdict may continue
    if (pipe != nullptr) {
        char buf[4096];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) {
            text.append(buf, n);
            pending.append(buf, n);
            for (std::size_t nl; (nl = pending.find('\n')) != std::string::npos; pending.erase(0, nl + 1)) {
                const std::string line = pending.substr(0, nl);
                if (line.find('\r') != std::string::npos) continue;  // a progress bar
                if (verdict_indent != std::string::npos && verdict_continues(line, verdict_indent)) {
                    fmt::print("{}\n", line);
                    continue;
                }
                const auto arrow = line.find("=> ");
                verdict_indent = arrow != std::string::npos && arrow == line.find_first_not_of(' ') ? arrow : std::string::npos;
                if (is_lesson_line(line)) fmt::print("{}\n", line);
            }
            std::fflush(stdout);
        }
        const int status = pclose(pipe);
        r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    r.seconds = now_seconds() - start;
    r.output = lines_of(text);
    r.ran = true;
    std::ofstream(fs::path(o.out) / (r.name + ".txt")) << saved_text(r.output);
    // The kernel settings it ran under: the guide-drift tests reuse this output only under the same.
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    const char* reference = std::getenv("XGRAD_REFERENCE_KERNELS");
    std::ofstream(fs::path(o.out) / (r.name + ".run"))
        << fmt::format("{:.3f} {}\nkernels OPENBLAS_CORETYPE={} XGRAD_REFERENCE_KERNELS={}\n", r.seconds, r.exit_code,
                       coretype ? coretype : "", reference ? reference : "");
    if (r.exit_code != 0) {
        fmt::print("  FAILED (exit {}); its last lines:\n", r.exit_code);
        const std::size_t from = r.output.size() > 30 ? r.output.size() - 30 : 0;
        for (std::size_t i = from; i < r.output.size(); ++i) fmt::print("  | {}\n", r.output[i]);
    } else if (r.verdicts().empty()) {
        fmt::print("  (no \"=>\" verdict printed: its guide discusses the result)\n");
    }
    std::fflush(stdout);
}

void load_previous(TutorialRun& r, const Options& o) {
    const fs::path txt = fs::path(o.out) / (r.name + ".txt");
    if (!fs::exists(txt)) return;
    std::ifstream in(txt);
    std::stringstream s;
    s << in.rdbuf();
    r.output = lines_of(s.str());
    r.ran = true;
    r.seconds = -1;
    std::ifstream run(fs::path(o.out) / (r.name + ".run"));
    run >> r.seconds >> r.exit_code;
}

std::string utc_now() {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M UTC", std::gmtime(&t));
    return buf;
}

// One line per program (name, article examples, time), the first line of its last verdict under it.
void print_summary(const std::vector<TutorialRun>& runs) {
    fmt::print("\n{}\n", rule("summary: each program's last \"=>\" verdict, first line (whole: above, in the report)"));
    fmt::print("{:<30} {:<58} {:>8}\n", "tutorial", "article examples", "time");
    for (const auto& r : runs) {
        const auto v = r.verdicts();
        const std::string verdict = !r.ran               ? "not run"
                                    : r.exit_code != 0   ? fmt::format("FAILED (exit {}): see its output above", r.exit_code)
                                    : v.empty()          ? "(no => verdict printed: its guide discusses the result)"
                                                         : v.back();
        fmt::print("{:<30} {:<58} {:>8}\n", r.name, cut(r.ids, 58), r.seconds < 0 ? "-" : fmt::format("{:.1f} s", r.seconds));
        fmt::print("    {}{}\n", v.empty() || !r.ran || r.exit_code != 0 ? "   " : "=> ", cut(verdict, kColumns - 7));
    }
}

}  // namespace

int main(int argc, char** argv) try {
    const Options o = parse(argc, argv);
    std::ifstream list(o.list);
    if (!list) usage_error("cannot read the tutorial list " + o.list + " (written by CMake when it configures the tutorials)");
    const std::string commit = commit_stamp();
    setenv("XGRAD_COMMIT", commit.c_str(), 1);  // gnuplot() stamps it on every figure: asked once
    fs::create_directories(o.out);

    std::vector<TutorialRun> runs;
    for (std::string line; std::getline(list, line);) {
        if (line.empty()) continue;
        const std::string name = line.substr(0, line.find(' '));
        const std::string args = line.find(' ') == std::string::npos ? "" : line.substr(line.find(' ') + 1);
        if (!o.only.empty() && o.only.count(name) == 0) continue;
        TutorialRun r;
        r.name = name;
        const std::string program = (fs::path(o.bin) / name).string();
        describe(r, program);
        if (o.report_only) load_previous(r, o);
        else run_one(r, program, args, o);
        runs.push_back(std::move(r));
    }
    for (const auto& name : o.only) {
        if (std::none_of(runs.begin(), runs.end(), [&](const TutorialRun& r) { return r.name == name; }))
            usage_error("--only " + name + ": not in " + o.list);
    }
    print_summary(runs);
    const std::string index = write_report(runs, {o.source, o.out, o.report, commit, utc_now()});
    const bool failed = std::any_of(runs.begin(), runs.end(), [](const TutorialRun& r) { return r.ran && r.exit_code != 0; });
    fmt::print("\nfull outputs, CSV files and plots: {}\nreport (open it in a browser, no server needed): {}\n", o.out, index);
    return failed ? 1 : 0;
} catch (const std::exception& e) {
    fmt::print(stderr, "xgrad_run_tutorials: {}\n", e.what());
    return 1;
}
