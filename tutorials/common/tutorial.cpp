#include "tutorials/common/tutorial.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <fmt/format.h>

#ifndef XGRAD_TUTORIAL_OUT_DIR
#define XGRAD_TUTORIAL_OUT_DIR "tutorials/out"
#endif

// OpenBLAS's worker threads spin on the small matrices of these models and burn system time on
// 2 shared cores; one thread is faster here. Weak, so nothing breaks with another BLAS.
extern "C" void openblas_set_num_threads(int) __attribute__((weak));

namespace xg::tutorial {

Flags parse_flags(int argc, char** argv, const std::string& usage_extra) {
    Flags f;
    f.out_dir = XGRAD_TUTORIAL_OUT_DIR;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--step") {
            f.step = true;
        } else if (a == "--full") {
            f.full = true;
        } else if (a == "--out" && i + 1 < argc) {
            f.out_dir = argv[++i];
        } else if (a == "--help" || a == "-h") {
            fmt::print("usage: {} [--step] [--full] [--out DIR]{}\n"
                       "  --step     pause after each step until Enter (when stdin is a terminal)\n"
                       "  --full     the long run (experiments only)\n"
                       "  --out DIR  where CSV files and plots go (default {})\n",
                       argv[0], usage_extra.empty() ? "" : " " + usage_extra, XGRAD_TUTORIAL_OUT_DIR);
            std::exit(0);
        } else {
            f.rest.push_back(a);
        }
    }
    return f;
}

Tutorial::Tutorial(int argc, char** argv, std::string title, std::string ids, const std::string& usage_extra)
    : flags_(parse_flags(argc, argv, usage_extra)) {
    if (openblas_set_num_threads != nullptr && std::getenv("OPENBLAS_NUM_THREADS") == nullptr) openblas_set_num_threads(1);
    fmt::print("=== {} ===\nArticle examples: {}\n", title, ids);
    if (flags_.step && !isatty(STDIN_FILENO)) flags_.step = false;  // piped input: run straight through
    if (flags_.step) fmt::print("(--step: press Enter after each step)\n");
    std::fflush(stdout);
}

std::string Tutorial::out_dir() const {
    std::filesystem::create_directories(flags_.out_dir);
    return flags_.out_dir;
}

std::string Tutorial::out_path(const std::string& file) const { return out_dir() + "/" + file; }

void Tutorial::section(const std::string& id, const std::string& title) {
    step_ = 0;
    fmt::print("\n[{}] {}\n", id, title);
    std::fflush(stdout);
}

void Tutorial::step(const std::string& label, double value, int precision) { step(label, num(value, precision)); }

void Tutorial::step(const std::string& label, const std::string& text) { step(label + " = " + text); }

void Tutorial::step(const std::string& text) {
    fmt::print("Step {}: {}\n", ++step_, text);
    pause();
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
    fmt::print("  Article: {}  ->  exact: {}\n  Note: {}\n", article_says, exact, why);
    std::fflush(stdout);
}

void Tutorial::conclude(const std::string& line) const {
    fmt::print("  => {}\n", line);
    std::fflush(stdout);
}

void Tutorial::pause() const {
    std::fflush(stdout);
    if (!flags_.step) return;
    std::string ignored;
    std::getline(std::cin, ignored);
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
    auto display_width = [](const std::string& s) {
        std::size_t n = 0;  // count UTF-8 code points, not bytes (for ✓ and ✗)
        for (unsigned char c : s) n += (c & 0xC0) != 0x80;
        return n;
    };
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

bool gnuplot(const std::string& script, const std::string& png_path) {
    const std::string gp_path = png_path.substr(0, png_path.rfind('.')) + ".gp";
    {
        std::ofstream out(gp_path);
        out << "set terminal pngcairo size 900,600 noenhanced\nset output '" << png_path << "'\n" << script << "\n";
    }
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fmt::print("  (gnuplot not found: plot skipped, the CSV is kept; script: {})\n", gp_path);
        return false;
    }
    const int rc = std::system(("gnuplot '" + gp_path + "' 2>/dev/null").c_str());
    if (rc != 0) {
        // pngcairo may be missing in gnuplot-nox builds; fall back to the plain png terminal.
        std::ofstream out(gp_path);
        out << "set terminal png size 900,600 noenhanced\nset output '" << png_path << "'\n" << script << "\n";
        out.close();
        if (std::system(("gnuplot '" + gp_path + "'").c_str()) != 0) {
            fmt::print("  (gnuplot failed: plot skipped, the CSV is kept; script: {})\n", gp_path);
            return false;
        }
    }
    return true;
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

}  // namespace xg::tutorial
