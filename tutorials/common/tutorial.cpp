#include "tutorials/common/tutorial.hpp"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <utility>

#include <fmt/format.h>

#ifndef XGRAD_TUTORIAL_OUT_DIR
#define XGRAD_TUTORIAL_OUT_DIR "tutorials/out"
#endif

// OpenBLAS's worker threads spin on the small matrices of these models and burn system time on
// 2 shared cores; one thread is faster here. Weak, so nothing breaks with another BLAS.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace xg::tutorial {

// "  label: text" with the text wrapped under itself, so that no line passes kColumns.
static std::string labelled(const std::string& label, const std::string& text) {
    const std::string indent(display_width(label), ' ');
    return label + wrap(text, kColumns, indent).substr(indent.size());
}

std::string usage(const std::string& program, const About& about) {
    std::string s = fmt::format("usage: {} [--step]{} [--out DIR] [--help]\n", program, about.full.empty() ? "" : " [--full]");
    s += fmt::format("{}\n", about.title);
    s += labelled("  article examples: ", about.ids);
    s += labelled("  guide:            ", about.guide);
    s += labelled("  run time:         ", about.run_time + (about.full.empty() ? "" : ", without --full"));
    s += labelled("  writes:           ", about.writes.empty() ? "no files" : about.writes);
    s += "options:\n";
    s += labelled("  --step     ", "pause after each step: Enter goes on, q and Enter quits (when stdin is a terminal)");
    if (!about.full.empty()) s += labelled("  --full     ", "the long run: " + about.full);
    s += labelled("  --out DIR  ", fmt::format("the directory for the files it writes (default {})", XGRAD_TUTORIAL_OUT_DIR));
    s += "  --help     this text\n";
    return s;
}

Flags parse_flags(int argc, char** argv, const About& about) {
    Flags f;
    f.out_dir = XGRAD_TUTORIAL_OUT_DIR;
    const std::string program = argc > 0 ? std::filesystem::path(argv[0]).filename().string() : about.title;
    auto reject = [&](const std::string& why) {
        std::fflush(stdout);
        fmt::print(stderr, "{}: {}\n{}", program, why, usage(program, about));
        std::exit(2);
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--step") {
            f.step = true;
        } else if (a == "--full" && !about.full.empty()) {
            f.full = true;
        } else if (a == "--out") {
            if (i + 1 >= argc) reject("--out needs a directory");
            f.out_dir = argv[++i];
        } else if (a == "--help" || a == "-h") {
            fmt::print("{}", usage(program, about));
            std::exit(0);
        } else if (a == "--full") {
            reject("this program has no long mode: --full does not apply");
        } else {
            reject(fmt::format("unknown argument '{}'", a));
        }
    }
    return f;
}

Tutorial::Tutorial(int argc, char** argv, About about) : about_(std::move(about)), flags_(parse_flags(argc, argv, about_)) {
    if (openblas_set_num_threads != nullptr && std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(1);
    fmt::print("=== {} ===\nArticle examples: {}\n", about_.title, about_.ids);
    if (flags_.step && !isatty(STDIN_FILENO)) flags_.step = false;  // piped input: run straight through
    if (flags_.step) fmt::print("(--step: after each step, Enter goes on and q then Enter quits)\n");
    std::fflush(stdout);
}

std::string Tutorial::out_dir() const {
    std::filesystem::create_directories(flags_.out_dir);
    return flags_.out_dir;
}

std::string Tutorial::out_path(const std::string& file) const { return out_dir() + "/" + file; }

void Tutorial::section(const std::string& id, const std::string& title) {
    pause_if_pending();
    step_ = 0;
    fmt::print("\n[{}] {}\n", id, title);
    std::fflush(stdout);
}

void Tutorial::step(const std::string& label, double value, int precision) { step(label, num(value, precision)); }

void Tutorial::step(const std::string& label, const std::string& text) { step(label + " = " + text); }

void Tutorial::step(const std::string& text) {
    pause_if_pending();
    fmt::print("Step {}: {}\n", ++step_, text);
    std::fflush(stdout);
    pending_pause_ = true;
}

void Tutorial::say(const std::string& line) const {
    fmt::print("  {}\n", line);
    std::fflush(stdout);
}

void Tutorial::show(const std::string& text) const {
    fmt::print("{}{}", text, !text.empty() && text.back() == '\n' ? "" : "\n");
    std::fflush(stdout);
}

void Tutorial::article_note(const std::string& article_says, const std::string& exact, const std::string& why) const {
    const std::string one_line = fmt::format("  Article: {}  ->  exact: {}", article_says, exact);
    if (display_width(one_line) <= kColumns) {
        fmt::print("{}\n  Note: {}\n", one_line, why);
    } else {
        fmt::print("  Article: {}\n  Exact:   {}\n  Note: {}\n", article_says, exact, why);
    }
    std::fflush(stdout);
}

void Tutorial::conclude(const std::string& line) {
    fmt::print("  => {}\n", line);
    std::fflush(stdout);
    pending_pause_ = true;
}

// Called when the next step or section is about to start: the previous step has printed
// everything it has to say. The prompt goes to stderr (stdout may be a log); on a terminal it is
// erased after Enter, so the screen reads like the output pasted in the guide.
void Tutorial::pause_if_pending() {
    if (!flags_.step || !pending_pause_) return;
    pending_pause_ = false;
    std::fflush(stdout);
    fmt::print(stderr, "  [Enter: next step, q: quit] ");
    std::fflush(stderr);
    std::string answer;
    if (!std::getline(std::cin, answer)) {  // end of input: run straight through from here
        flags_.step = false;
        fmt::print(stderr, "\n");
        return;
    }
    if (answer == "q" || answer == "Q" || answer == "quit") {
        fmt::print(stderr, "stopped at your request after step {} ({})\n", step_, about_.title);
        std::exit(0);
    }
    const char* term = std::getenv("TERM");
    if (isatty(STDERR_FILENO) && term != nullptr && std::string(term) != "dumb") fmt::print(stderr, "\033[1A\033[2K");
    std::fflush(stderr);
}

// ---- formatting -------------------------------------------------------------------------------

std::string num(double v, int precision) {
    if (std::isnan(v)) return "nan";  // never "-nan": the sign of a NaN carries no meaning
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (std::isfinite(v) && std::fabs(v) < 0.5 * std::pow(10.0, -precision)) v = 0.0;
    return fmt::format("{:.{}f}", v, precision);
}

std::string sci(double v, int digits) {
    if (!std::isfinite(v)) return num(v);
    return fmt::format("{:.{}e}", v, digits); }

std::string under(double v, double bound) {
    std::string b = fmt::format("{:.0e}", bound);  // "1e-06" -> "1e-6"
    if (const auto zero = b.find("e-0"); zero != std::string::npos) b.erase(zero + 2, 1);
    if (std::fabs(v) < bound) return "< " + b;
    return fmt::format("{} (over {})", sci(v, 2), b);
}

std::string gradcheck_line(const GradcheckResult& r, double abs_bound, double rel_bound) {
    return fmt::format("gradcheck {} {}: {} {}, max abs err {}, max rel err {}", r.name, r.ok ? "ok" : "FAILED",
                       r.checked_elements, r.projection_mode ? "projections" : "entries", under(r.max_abs_error, abs_bound),
                       under(r.max_rel_error, rel_bound));
}

std::size_t display_width(const std::string& s) {
    std::size_t n = 0;  // count UTF-8 code points, not bytes (for ✓ and ✗)
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

std::string wrap(const std::string& text, std::size_t width, const std::string& prefix) {
    const std::size_t room = width > display_width(prefix) + 10 ? width - display_width(prefix) : 10;
    std::string out, line;
    auto flush = [&] {
        out += prefix + line + "\n";
        line.clear();
    };
    std::size_t i = 0;
    while (i < text.size()) {
        if (text[i] == '\n') {
            flush();
            ++i;
            continue;
        }
        const std::size_t end = std::min(text.find_first_of(" \n", i), text.size());
        std::string word = text.substr(i, end - i);
        while (display_width(word) > room) {  // longer than a line: cut it
            if (!line.empty()) flush();
            line = word.substr(0, room);
            word = word.substr(room);
            flush();
        }
        if (!line.empty() && display_width(line) + 1 + display_width(word) > room) flush();
        line += (line.empty() ? "" : " ") + word;
        i = end < text.size() && text[end] == ' ' ? end + 1 : end;
    }
    if (!line.empty() || out.empty()) flush();
    return out;
}

std::string vec(const std::vector<double>& a, int precision) {
    std::string s = "[";
    for (std::size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + num(a[i], precision);
    return s + "]";
}

std::string vec(const Array& a, int precision) { return vec(std::vector<double>(a.begin(), a.end()), precision); }

std::string matrix(const Array& a, int precision, const std::string& indent) {
    if (a.dimension() != 2) return indent + vec(a, precision);
    const std::size_t rows = a.shape()[0], cols = a.shape()[1];
    std::size_t width = 0;  // right-align every column to the widest number
    for (double v : a) width = std::max(width, num(v, precision).size());
    std::string s;
    for (std::size_t r = 0; r < rows; ++r) {
        s += (r ? "\n" : "") + indent + "[";
        for (std::size_t c = 0; c < cols; ++c) s += fmt::format("{}{:>{}}", c ? ", " : "", num(a(r, c), precision), width);
        s += "]";
    }
    return s;
}

std::string shape(const Shape& s) {
    std::string out = "(";
    for (std::size_t i = 0; i < s.size(); ++i) out += fmt::format(i ? ", {}" : "{}", s[i]);
    return out + (s.size() == 1 ? ",)" : ")");
}

std::string table(const std::vector<std::vector<std::string>>& rows, const std::string& indent) {
    std::vector<std::size_t> width;
    for (const auto& r : rows) {
        if (width.size() < r.size()) width.resize(r.size(), 0);
        for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], display_width(r[i]));
    }
    std::string s;
    for (std::size_t ri = 0; ri < rows.size(); ++ri) {
        std::string line = indent;
        for (std::size_t i = 0; i < rows[ri].size(); ++i) {
            const std::string& cell = rows[ri][i];
            line += cell + std::string(width[i] - display_width(cell), ' ');
            if (i + 1 < rows[ri].size()) line += " | ";
        }
        while (!line.empty() && line.back() == ' ') line.pop_back();
        s += line + "\n";
        if (ri == 0) {
            std::string rule = indent;
            for (std::size_t i = 0; i < width.size(); ++i) rule += std::string(width[i], '-') + (i + 1 < width.size() ? "-+-" : "");
            s += rule + "\n";
        }
    }
    return s;
}

double max_abs_diff(const Array& a, const Array& b) {
    if (a.shape() != b.shape()) fail("max_abs_diff", "shapes differ");
    double worst = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(a.data()[i] - b.data()[i]));
    return worst;
}

// ---- files and plots --------------------------------------------------------------------------

void write_csv(const std::string& path, const std::vector<std::string>& header,
               const std::vector<std::vector<double>>& rows) {
    std::ofstream out(path);
    if (!out) fail("write_csv", "cannot open " + path);
    for (std::size_t i = 0; i < header.size(); ++i) out << (i ? "," : "") << header[i];
    out << "\n";
    for (const auto& r : rows) {
        for (std::size_t i = 0; i < r.size(); ++i) out << (i ? "," : "") << fmt::format("{:.10g}", r[i]);
        out << "\n";
    }
}

std::string commit_stamp() {
    if (const char* env = std::getenv("XGRAD_COMMIT"); env != nullptr && *env != '\0') return env;
#ifdef XGRAD_TUTORIAL_SOURCE_DIR
    auto first_line = [](const std::string& cmd) {
        std::string out;
        if (FILE* pipe = popen(cmd.c_str(), "r")) {
            char buf[256];
            while (std::fgets(buf, sizeof buf, pipe) != nullptr) out += buf;
            pclose(pipe);
        }
        return out.substr(0, out.find('\n'));
    };
    const std::string git = "git -C '" XGRAD_TUTORIAL_SOURCE_DIR "' ";
    const std::string head = first_line(git + "rev-parse --short HEAD 2>/dev/null");
    if (!head.empty()) return head + (first_line(git + "status --porcelain --untracked-files=no 2>/dev/null").empty() ? "" : "-dirty");
#endif
    return "unknown";
}

bool gnuplot(const std::string& script, const std::string& png_path, int width, int height, const std::string& seeds) {
    const std::string base = png_path.substr(0, png_path.rfind('.'));
    const std::string gp_path = base + ".gp";
    // The stamp: a small grey label in the lower right corner of the whole canvas. A bottom margin
    // of 5 lines (the automatic one is about 3 with an x label) leaves it a strip of its own under
    // the x labels: in the corner it covered the last panel's x label.
    const std::string stamp = fmt::format("seeds {} | commit {}", seeds.empty() ? "none (fixed inputs)" : seeds, commit_stamp());
    const std::string body = fmt::format("# seeds: {}\nset bmargin 5\nset label 9999 \"{}\" at screen 0.995, screen 0.012 right "
                                         "font \",9\" textcolor rgb \"#808080\"\n{}\n",
                                         seeds.empty() ? "none (fixed inputs)" : seeds, stamp, script);
    auto write = [&](const char* terminal) {
        std::ofstream out(gp_path);
        out << fmt::format("set terminal {} size {},{} noenhanced\nset output '{}'\n{}", terminal, width, height, png_path, body);
    };
    // "plot:" lines are skipped by the guide-drift test: whether gnuplot is installed changes nothing compared.
    write("pngcairo");
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fmt::print("  plot: skipped, gnuplot not found (the CSV is kept; script: {})\n", gp_path);
        return false;
    }
    if (std::system(("gnuplot '" + gp_path + "' 2>/dev/null").c_str()) != 0) {
        write("png");  // pngcairo may be missing in some gnuplot builds; the plain png terminal then
        if (std::system(("gnuplot '" + gp_path + "'").c_str()) != 0) {
            fmt::print("  plot: skipped, gnuplot failed (the CSV is kept; script: {})\n", gp_path);
            return false;
        }
    }
    // The same script through the svg terminal, fed on stdin (the .gp file stays the PNG's script).
    if (FILE* svg = popen("gnuplot 2>/dev/null", "w")) {
        std::fputs(fmt::format("set terminal svg size {},{} noenhanced font 'sans,12' background '#ffffff'\nset output '{}.svg'\n{}",
                               width, height, base, body).c_str(), svg);
        if (pclose(svg) != 0) fmt::print("  plot: the SVG of {} failed (the PNG is kept)\n", png_path);
    }
    return true;
}

void keep_heap_mapped() {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

double now_seconds() {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

bool is_volatile_line(const std::string& line) {
    const auto first = line.find_first_not_of(' ');
    if (first == std::string::npos) return false;
    for (const char* prefix : {"time:", "plot:", "csv:"}) {
        if (line.compare(first, std::char_traits<char>::length(prefix), prefix) == 0) return true;
    }
    return line.find('\r') != std::string::npos;
}

std::string kernel_settings() {
    const char* coretype = std::getenv("OPENBLAS_CORETYPE");
    const char* reference = std::getenv("XGRAD_REFERENCE_KERNELS");
    return fmt::format("kernels OPENBLAS_CORETYPE={} XGRAD_REFERENCE_KERNELS={}", coretype ? coretype : "",
                       reference ? reference : "");
}

ValuesForTests::ValuesForTests() {
    if (const char* path = std::getenv("XGRAD_TUTORIAL_VALUES"); path != nullptr) path_ = path;
}

void ValuesForTests::add(const std::string& key, const std::vector<double>& values) {
    if (path_.empty()) return;
    if (key.empty() || key.find_first_of(" \t\n") != std::string::npos) fail("ValuesForTests::add", "bad key '" + key + "'");
    rows_ += key;
    for (double v : values) rows_ += fmt::format(" {:.17g}", v);
    rows_ += "\n";
}

void ValuesForTests::write() const {
    if (path_.empty()) return;
    const std::string temporary = fmt::format("{}.{}.tmp", path_, getpid());
    {
        std::ofstream out(temporary);
        out << kernel_settings() << "\n" << rows_;
        if (!out.flush()) fail("ValuesForTests::write", "cannot write " + temporary);
    }
    std::error_code ec;
    std::filesystem::rename(temporary, path_, ec);
    if (ec) fail("ValuesForTests::write", "cannot rename " + temporary + " to " + path_ + ": " + ec.message());
}

}  // namespace xg::tutorial
