// The tutorial support every tutorials/NN_name.cpp program uses: command-line flags, labelled
// step printing ("Step 2: variance = 5.00000"), article notes, number formatting, CSV files,
// gnuplot plots (the long experiments use optim::ProgressBar).
//
// Output is meant to be pasted into docs/tutorials/*.md and compared by a test, so everything
// printed here is deterministic except lines that start with "time:", "plot:" or "csv:" (the
// last two name files under --out, which differs between checkouts) or contain a progress bar
// (the guide-drift test skips those; see is_volatile_line).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace xg::tutorial {

/// Command-line flags shared by every tutorial.
struct Flags {
    bool step = false;         ///< --step: pause after each step until Enter (only on a terminal)
    bool full = false;         ///< --full: the long, paper-sized run of an experiment
    std::string out_dir;       ///< --out DIR: where CSV files and plots go
    std::vector<std::string> rest; ///< anything else, for the program's own options
};

/// Parses --step, --full, --out DIR and --help; unknown flags are kept in Flags::rest.
Flags parse_flags(int argc, char** argv, const std::string& usage_extra = "");

/// A step-through session: numbered steps inside titled sections keyed by article example IDs.
class Tutorial {
public:
    /// `title` like "01 LayerNorm by hand"; `ids` like "A0.1, A2.1, A2.2, A3.1, A3.2".
    Tutorial(int argc, char** argv, std::string title, std::string ids, const std::string& usage_extra = "");

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
    /// A conclusion line: "  => text".
    void conclude(const std::string& line) const;

private:
    void pause() const;
    Flags flags_;
    int step_ = 0;
};

// ---- formatting -----------------------------------------------------------------------------

/// A number with `precision` decimals; values that round to zero print as 0 (never "-0.00000").
std::string num(double v, int precision = 5);
/// Scientific notation with `digits` significant decimals, e.g. "2.2e-16".
std::string sci(double v, int digits = 1);
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
/// Runs gnuplot on `script` (written next to `png_path` as .gp). Returns false, after printing
/// why, when gnuplot is missing or fails; the CSV stays either way.
bool gnuplot(const std::string& script, const std::string& png_path);

/// Seconds since an arbitrary epoch (for timing lines).
double now_seconds();

/// True for lines that legitimately change run to run or checkout to checkout (timings, progress,
/// paths of written files) - skipped by the guide-drift test.
bool is_volatile_line(const std::string& line);

}  // namespace xg::tutorial
