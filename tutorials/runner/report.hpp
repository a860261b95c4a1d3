// What one tutorial run left behind, and the offline HTML report written from it (report.cpp).
#pragma once

#include <string>
#include <vector>

namespace xg::tutorial::runner {

/// One "=>" conclusion as printed, with the claim it speaks to and what it says of it.
struct Verdict {
    std::string id;                  ///< the claim ID it names ("A0.5"), else its section's ("A0.5 / A4.3"), else "-"
    std::vector<std::string> lines;  ///< its lines: the first without "=> ", the wrapped ones without their indent
    std::string status;              ///< verdict_status() of its text
    std::string text() const;        ///< the lines joined by spaces
};

/// What a verdict says of its claim, from the first of these words in it: "cannot decide"
/// ("cannot decide", "cannot tell"), "partly" ("partly", "half of it"), "not shown" ("not
/// shown", "does not hold", "not at this scale", "no sign", ...), "holds" ("holds", "held
/// there", "reproduced"); "stated" when it has none (a result shown, no claim weighed).
std::string verdict_status(const std::string& text);

/// One program of the list: what its --help says about it and what its run printed.
struct TutorialRun {
    std::string name;                 ///< "01_layernorm_by_hand"
    std::string title;                ///< "01 LayerNorm by hand" (the name when --help has no title)
    std::string ids;                  ///< "A0.1, A2.1, A2.2, A3.1, A3.2", or "-"
    std::string guide;                ///< "docs/tutorials/01-layernorm-by-hand.md", or "" when it has none
    std::vector<std::string> output;  ///< every line it printed (progress-bar redraws dropped)
    double seconds = 0.0;             ///< wall time of the run; negative when unknown
    int exit_code = 0;
    bool ran = false;                 ///< false: no output file was found (report mode)

    /// The "=>" conclusions, without the arrow, each on one line.
    std::vector<std::string> verdicts() const;
    /// The same, line by line, each labelled with its claim ID and status.
    std::vector<Verdict> verdict_blocks() const;
    /// The article notes ("Article:", "Exact:", "Note:" lines), as printed.
    std::vector<std::string> notes() const;
};

/// True when `line` continues a verdict whose "=>" stood at column `verdict_indent` (conclude()
/// wraps long ones under their first word).
std::size_t verdict_continues(const std::string& line, std::size_t verdict_indent);

/// Where things are and what stamps the report.
struct ReportInputs {
    std::string source_dir;  ///< the checkout (guides are read from <source_dir>/<guide>)
    std::string out_dir;     ///< the tutorials' --out directory: their SVG figures are taken from here
    std::string report_dir;  ///< written: index.html, one page per tutorial, figures/, img/
    std::string commit;      ///< "b7cc7ab" (plus "-dirty"), stamped on every page and figure
    std::string date;        ///< when the run ended, UTC
};

/// The figures (SVG) a tutorial wrote under out_dir: files named "<NN>_*.svg" for tutorial NN.
std::vector<std::string> figures_of(const TutorialRun& run, const std::string& out_dir);

/// The figure's seeds, from the "seeds" stamp gnuplot() put into its .gp script ("" when none).
std::string seeds_of_figure(const std::string& svg_path);

/// Writes the report; returns the path of index.html. Throws xg::Error naming the file it could
/// not write.
std::string write_report(const std::vector<TutorialRun>& runs, const ReportInputs& in);

}  // namespace xg::tutorial::runner
