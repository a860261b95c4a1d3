// The tutorial support every tutorial program (tutorials/<NN_name>/<NN_name>.cpp) uses:
// command-line flags, labelled step printing ("Step 2: variance = 5.00000"), article notes,
// number formatting, CSV files, gnuplot plots (the long experiments use optim::ProgressBar).
//
// Output is meant to be pasted into docs/tutorials/*.md and compared by a test, so everything
// printed here is deterministic except lines that start with "time:", "plot:" or "csv:" (the
// last two name files under --out, which differs between checkouts, or say that gnuplot or
// Graphviz is missing) or contain a progress bar (the guide-drift test skips those; see
// is_volatile_line). Numbers whose digits depend on the machine are printed so that they do not:
// finite-difference errors as bounds (under()); see tests/tutorials/test_tutorials.cpp for the rest.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/tools/gradcheck.hpp"
#include "core/engine/tensor.hpp"

namespace xg::tutorial {

/// Every line a tutorial prints fits this many columns (the guide-drift test checks it).
constexpr std::size_t kColumns = 100;

/// What a program is: printed in its header and its --help.
struct About {
    std::string title;     ///< "01 LayerNorm by hand"
    std::string ids;       ///< the article examples it covers, "A0.1, A2.1, A2.2, A3.1, A3.2"
    std::string guide;     ///< "docs/tutorials/01-layernorm-by-hand.md"
    std::string run_time;  ///< typical run time of the default run, measured ("about 1 s")
    std::string full;      ///< what --full does; empty: no long mode, and --full is rejected
    std::string writes;    ///< files written under --out DIR; empty: none
};

/// Command-line flags shared by every tutorial.
struct Flags {
    bool step = false;         ///< --step: pause after each step until Enter (only on a terminal)
    bool full = false;         ///< --full: the long, paper-sized run of an experiment
    std::string out_dir;       ///< --out DIR: where CSV files and plots go
};

/// The --help text of a program.
std::string usage(const std::string& program, const About& about);
/// Parses --step, --full (only where About::full is set), --out DIR and --help. --help prints
/// usage() and exits 0; anything else prints what was wrong and the usage to stderr and exits 2.
Flags parse_flags(int argc, char** argv, const About& about);

/// A step-through session: numbered steps inside titled sections keyed by article example IDs.
/// With --step it pauses after each step's whole content (its notes, tables and "=>" conclusion),
/// that is just before the next step or section starts.
class Tutorial {
public:
    Tutorial(int argc, char** argv, About about);

    const Flags& flags() const { return flags_; }
    bool full() const { return flags_.full; }
    /// Directory for CSV/PNG outputs (created on first use).
    std::string out_dir() const;
    /// Full path of an output file in out_dir().
    std::string out_path(const std::string& file) const;

    /// Starts a section "[A2.1] hand calculation"; step numbers restart at 1.
    void section(const std::string& id, const std::string& title);
    /// "Step n: label = value" with `precision` decimals.
    void step(const std::string& label, double value, int precision = 5);
    /// "Step n: label = text".
    void step(const std::string& label, const std::string& text);
    /// "Step n: text".
    void step(const std::string& text);
    /// An indented line under the current step.
    void say(const std::string& line) const;
    /// Pre-formatted text (a matrix, a table) printed as is.
    void show(const std::string& text) const;
    /// "  Article: <what the article says>  ->  exact: <value>" plus why, for loose or wrong numbers.
    void article_note(const std::string& article_says, const std::string& exact, const std::string& why) const;
    /// A conclusion line: "  => text" (with --step, a pause follows it like a step's content).
    void conclude(const std::string& line);

private:
    void pause_if_pending();
    About about_;
    Flags flags_;
    int step_ = 0;
    bool pending_pause_ = false;  // a step was printed since the last pause
};

// ---- formatting -----------------------------------------------------------------------------

/// A number with `precision` decimals; values that round to zero print as 0 (never "-0.00000").
std::string num(double v, int precision = 5);
/// Scientific notation with `digits` significant decimals, e.g. "2.2e-16".
std::string sci(double v, int digits = 1);
/// An error printed as the bound it stays under, "< 1e-6", for numbers whose digits are noise:
/// finite-difference errors move by a factor of ~3 with the summation order of the BLAS kernel
/// (OPENBLAS_CORETYPE). The tutorials pick as bound the smallest power of ten at least 10 times the
/// largest value measured under the OpenBLAS kernels (see docs/tutorials/README.md). A value at or
/// above the bound prints as itself with "(over <bound>)", so a broken claim shows in the output.
std::string under(double v, double bound);
/// A gradcheck result as one line with its errors printed as bounds (see under()):
/// "gradcheck Pre-LN block (d 4, 2 heads) ok: 144 entries, max abs err < 1e-8, max rel err < 1e-5".
std::string gradcheck_line(const GradcheckResult& r, double abs_bound, double rel_bound);
/// `text` broken into lines of at most `width` columns (at spaces where possible, else anywhere),
/// each prefixed by `prefix`.
std::string wrap(const std::string& text, std::size_t width, const std::string& prefix = "");
/// Display width of a UTF-8 string (code points; the tutorials print no wide characters).
std::size_t display_width(const std::string& s);
/// "[a, b, c]" for a 1-D array (or the flattened values of any array).
std::string vec(const Array& a, int precision = 5);
std::string vec(const std::vector<double>& a, int precision = 5);
/// One "[...]" line per row of a 2-D array, each prefixed by `indent`.
std::string matrix(const Array& a, int precision = 5, const std::string& indent = "    ");
/// "(2, 4, 8)".
std::string shape(const Shape& s);
/// A fixed-width text table (first row = header), each line prefixed by `indent`.
std::string table(const std::vector<std::vector<std::string>>& rows, const std::string& indent = "  ");

/// Largest |a - b| over all elements (shapes must match).
double max_abs_diff(const Array& a, const Array& b);

// ---- files and plots --------------------------------------------------------------------------

/// Writes a CSV file (header + rows of numbers).
void write_csv(const std::string& path, const std::vector<std::string>& header,
               const std::vector<std::vector<double>>& rows);
/// Runs gnuplot on `script` (written next to `png_path` as .gp) for a `width` x `height` PNG, and
/// again for an SVG of it beside (the HTML report shows the SVG: it stays sharp). Both are stamped
/// in a corner with `seeds` ("1, 2, 3"; empty: fixed inputs) and commit_stamp().
/// Returns false, after printing why on a "plot:" line, when gnuplot is missing or fails; the
/// CSV stays either way.
bool gnuplot(const std::string& script, const std::string& png_path, int width = 900, int height = 600,
             const std::string& seeds = "");
/// The commit the figures come from: $XGRAD_COMMIT (the runner sets it), else `git rev-parse
/// --short HEAD` of the checkout (with "-dirty" for uncommitted changes), else "unknown".
std::string commit_stamp();

/// Keeps glibc from handing freed memory back to the kernel (mallopt: mmap threshold 32 MiB, trim
/// threshold 64 MiB) for the rest of the process. Without it, on the reference VM, a training
/// run's large temporaries are mapped and faulted in afresh at every step until the allocator's
/// dynamic threshold happens to rise: the first model a process trains ran up to 8 times slower
/// than the next (perf: a quarter of its time in the kernel's page-fault path). Numbers unchanged.
void keep_heap_mapped();

/// Seconds since an arbitrary epoch (for timing lines).
double now_seconds();

/// True for lines that legitimately change run to run or checkout to checkout (timings, progress,
/// paths of written files) - skipped by the guide-drift test.
bool is_volatile_line(const std::string& line);

// ---- values for the tests ---------------------------------------------------------------------

/// "kernels OPENBLAS_CORETYPE=<value> XGRAD_REFERENCE_KERNELS=<value>" from this process's
/// environment: the two settings that move a run's last bits (the OpenBLAS kernel, the fused ops'
/// kernel tier), in the form of the runner's <name>.run files.
std::string kernel_settings();

/// Test-only: the values a program's computations returned, kept for the tests of its numbers
/// (tests/tutorials/tutorial_runs.hpp). The guide-drift test runs a program with the environment
/// variable XGRAD_TUTORIAL_VALUES naming a file; write() then saves there kernel_settings() and
/// every add()ed row, each number with 17 significant digits (read back, the same double), so
/// that a test of the numbers asserts the values of that run instead of training the same models
/// a second time. Without the variable (every other run) add() keeps nothing and write() writes
/// nothing: the program prints and writes what it did before.
class ValuesForTests {
public:
    ValuesForTests();
    /// One row, "key v1 v2 ...": `key` must not contain whitespace.
    void add(const std::string& key, const std::vector<double>& values);
    /// Writes the file, to a temporary name renamed over the path: a reader sees every row or none.
    /// Called at the end of main(), once the run is complete.
    void write() const;

private:
    std::string path_;  // empty: not asked for
    std::string rows_;
};

}  // namespace xg::tutorial
