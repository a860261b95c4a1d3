#include "tutorials/runner/report.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#ifdef XGRAD_HAVE_CMARK_GFM
#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>
#endif

#include "core/engine/tensor.hpp"

namespace fs = std::filesystem;

namespace xg::tutorial::runner {

namespace {

std::string trimmed(const std::string& s) {
    const auto b = s.find_first_not_of(' ');
    return b == std::string::npos ? "" : s.substr(b);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    if (!out) fail("tutorial report", "cannot write " + path);
}

std::string escape(const std::string& s) {
    std::string out;
    out.reserve(s.size());
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            default: out += c;
        }
    }
    return out;
}

std::string page_of(const std::string& name) { return name + ".html"; }

// The guide as HTML. GitHub's markdown (tables) through Debian's cmark-gfm; raw HTML in the guide
// (the output markers) is dropped by cmark's default safe mode.
std::string render_markdown(const std::string& markdown) {
#ifdef XGRAD_HAVE_CMARK_GFM
    cmark_gfm_core_extensions_ensure_registered();
    cmark_parser* parser = cmark_parser_new(CMARK_OPT_DEFAULT);
    if (cmark_syntax_extension* table = cmark_find_syntax_extension("table")) cmark_parser_attach_syntax_extension(parser, table);
    cmark_parser_feed(parser, markdown.data(), markdown.size());
    cmark_node* doc = cmark_parser_finish(parser);
    char* html = cmark_render_html(doc, CMARK_OPT_DEFAULT, cmark_parser_get_syntax_extensions(parser));
    std::string out(html);
    cmark_get_default_mem_allocator()->free(html);
    cmark_node_free(doc);
    cmark_parser_free(parser);
    return out;
#else
    return "<p>(built without libcmark-gfm-dev: the guide as plain text)</p><pre>" + escape(markdown) + "</pre>";
#endif
}

// Links inside the report only: a link to another tutorial's guide goes to that tutorial's page;
// anchors stay; any other link (a doc outside the report, a web page) becomes plain text with its
// target in a tooltip, so that the report never points outside its folder.
std::string localise_links(const std::string& html, const std::map<std::string, std::string>& guide_to_page) {
    static const std::regex link(R"re(<a href="([^"]*)"( title="[^"]*")?>)re");
    std::string out;
    std::size_t pos = 0;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), link); it != std::sregex_iterator(); ++it) {
        const auto at = static_cast<std::size_t>(it->position());
        out += html.substr(pos, at - pos);
        pos = at + static_cast<std::size_t>(it->length());
        const std::string target = (*it)[1].str();
        const std::string file = target.substr(0, target.find('#'));
        const auto page = guide_to_page.find(fs::path(file).filename().string());
        if (target.rfind('#', 0) == 0) {
            out += it->str();
        } else if (page != guide_to_page.end() && file.find('/') == std::string::npos) {
            out += "<a href=\"" + page->second + "\">";
        } else {
            // the closing </a> is replaced below: find it and turn the pair into a span
            const auto close = html.find("</a>", pos);
            out += "<span class=\"outside\" title=\"" + target + " (outside the report)\">" + html.substr(pos, close - pos) + "</span>";
            pos = close + 4;
        }
    }
    return out + html.substr(pos);
}

const char* kStyle = R"css(
body { font-family: sans-serif; max-width: 72rem; margin: 1.5rem auto; padding: 0 1rem; color: #222; line-height: 1.45; }
nav { font-size: 0.9rem; margin-bottom: 1rem; }
.meta { color: #555; font-size: 0.9rem; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; line-height: 1.25; }
code { background: #f6f6f6; }
table { border-collapse: collapse; margin: 0.5rem 0; }
td, th { border: 1px solid #ccc; padding: 0.2rem 0.5rem; vertical-align: top; font-size: 0.9rem; }
th { background: #eee; text-align: left; }
td.num { white-space: nowrap; text-align: right; }
.verdict { font-family: monospace; }
.failed { color: #b00; font-weight: bold; }
.none { color: #777; font-style: italic; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; border: 1px solid #ddd; background: white; }
figcaption { font-size: 0.85rem; color: #555; }
.outside { border-bottom: 1px dotted #888; }
section.guide { border-top: 2px solid #ddd; margin-top: 2rem; }
)css";

std::string page(const std::string& title, const std::string& body) {
    return fmt::format("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{}</style>\n"
                       "</head>\n<body>\n{}\n</body>\n</html>\n",
                       escape(title), kStyle, body);
}

std::string time_text(const TutorialRun& r) { return r.seconds < 0 ? "-" : fmt::format("{:.1f} s", r.seconds); }

std::string status_html(const TutorialRun& r) {
    if (!r.ran) return "<span class=\"none\">not run</span>";
    if (r.exit_code != 0) return fmt::format("<span class=\"failed\">FAILED (exit {})</span>", r.exit_code);
    return "";
}

std::string verdicts_html(const TutorialRun& r) {
    const auto v = r.verdicts();
    if (v.empty()) return "<span class=\"none\">no =&gt; verdict printed: see the guide</span>";
    std::string s;
    for (const auto& line : v) s += "<div class=\"verdict\">=&gt; " + escape(line) + "</div>";
    return s;
}

std::string figure_html(const std::string& file, const std::string& seeds, const ReportInputs& in) {
    return fmt::format("<figure><img src=\"figures/{0}\" alt=\"{0}\"><figcaption>{0}: seeds {1}; commit {2}</figcaption></figure>\n",
                       escape(file), escape(seeds.empty() ? "none (fixed inputs)" : seeds), escape(in.commit));
}

}  // namespace

std::size_t verdict_continues(const std::string& line, std::size_t verdict_indent) {
    const std::size_t text = verdict_indent + 3;  // "=> " then the text; a wrapped verdict continues under it
    return line.size() > text && line.find_first_not_of(' ') == text;
}

std::vector<std::string> TutorialRun::verdicts() const {
    std::vector<std::string> v;
    std::size_t indent = std::string::npos;  // of the "=>" of the verdict being read
    for (const auto& line : output) {
        const std::string t = trimmed(line);
        if (t.rfind("=> ", 0) == 0) {
            v.push_back(t.substr(3));
            indent = line.size() - t.size();
        } else if (indent != std::string::npos && verdict_continues(line, indent)) {
            v.back() += " " + t;
        } else {
            indent = std::string::npos;
        }
    }
    return v;
}

std::vector<std::string> TutorialRun::notes() const {
    std::vector<std::string> v;
    for (const auto& line : output) {
        const std::string t = trimmed(line);
        for (const char* prefix : {"Article:", "Exact:", "Note:"}) {
            if (t.rfind(prefix, 0) == 0) v.push_back(line);
        }
    }
    return v;
}

std::vector<std::string> figures_of(const TutorialRun& run, const std::string& out_dir) {
    std::vector<std::string> files;
    const std::string prefix = run.name.substr(0, run.name.find('_') + 1);  // "05_"
    if (prefix.size() < 2 || !fs::is_directory(out_dir)) return files;
    for (const auto& entry : fs::directory_iterator(out_dir)) {
        const std::string file = entry.path().filename().string();
        if (entry.is_regular_file() && file.rfind(prefix, 0) == 0 && entry.path().extension() == ".svg") files.push_back(file);
    }
    std::sort(files.begin(), files.end());
    return files;
}

std::string seeds_of_figure(const std::string& svg_path) {
    std::ifstream gp(fs::path(svg_path).replace_extension(".gp"));
    for (std::string line; std::getline(gp, line);) {
        if (line.rfind("# seeds: ", 0) == 0) return line.substr(9);
    }
    return "";
}

std::string write_report(const std::vector<TutorialRun>& runs, const ReportInputs& in) {
    // A fresh report: pages and figures of programs not in this run would be stale.
    if (fs::is_directory(in.report_dir)) {
        for (const auto& entry : fs::directory_iterator(in.report_dir)) {
            if (entry.path().extension() == ".html") fs::remove(entry.path());
        }
        fs::remove_all(fs::path(in.report_dir) / "figures");
    }
    fs::create_directories(fs::path(in.report_dir) / "figures");
    // The guides' own pictures (docs/tutorials/img, from --full runs) beside the pages, as the guides link them.
    const fs::path guide_images = fs::path(in.source_dir) / "docs/tutorials/img";
    if (fs::is_directory(guide_images)) {
        fs::create_directories(fs::path(in.report_dir) / "img");
        fs::copy(guide_images, fs::path(in.report_dir) / "img", fs::copy_options::overwrite_existing | fs::copy_options::recursive);
    }
    std::map<std::string, std::string> guide_to_page;
    for (const auto& r : runs) {
        if (!r.guide.empty()) guide_to_page[fs::path(r.guide).filename().string()] = page_of(r.name);
    }
    const std::string stamp = fmt::format("commit {}, {}", escape(in.commit), escape(in.date));

    std::string rows;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const TutorialRun& r = runs[i];
        const auto figures = figures_of(r, in.out_dir);
        // the page
        std::string body = "<nav><a href=\"index.html\">all tutorials</a>";
        if (i > 0) body += fmt::format(" · previous: <a href=\"{}\">{}</a>", page_of(runs[i - 1].name), escape(runs[i - 1].title));
        if (i + 1 < runs.size()) body += fmt::format(" · next: <a href=\"{}\">{}</a>", page_of(runs[i + 1].name), escape(runs[i + 1].title));
        body += "</nav>\n";
        body += fmt::format("<h1>{}</h1>\n<p class=\"meta\">article examples: {} · guide: <code>{}</code> · run time {} · {} {}</p>\n",
                            escape(r.title), escape(r.ids), escape(r.guide.empty() ? "none" : r.guide), time_text(r), stamp,
                            status_html(r));
        body += "<h2>Verdicts of this run</h2>\n" + verdicts_html(r) + "\n";
        if (const auto notes = r.notes(); !notes.empty()) {
            body += "<h2>Where the articles say otherwise</h2>\n<pre>";
            for (const auto& n : notes) body += escape(n) + "\n";
            body += "</pre>\n";
        }
        if (!figures.empty()) {
            body += "<h2>Figures of this run</h2>\n";
            for (const auto& f : figures) {
                fs::copy_file(fs::path(in.out_dir) / f, fs::path(in.report_dir) / "figures" / f, fs::copy_options::overwrite_existing);
                body += figure_html(f, seeds_of_figure((fs::path(in.out_dir) / f).string()), in);
            }
        }
        body += "<h2>Output of this run</h2>\n<pre>";
        for (const auto& line : r.output) body += escape(line) + "\n";
        body += "</pre>\n";
        if (!r.guide.empty()) {
            const std::string markdown = read_file((fs::path(in.source_dir) / r.guide).string());
            body += "<section class=\"guide\">\n<p class=\"meta\">the guide, " + escape(r.guide) + ":</p>\n" +
                    localise_links(render_markdown(markdown), guide_to_page) + "</section>\n";
        }
        write_file((fs::path(in.report_dir) / page_of(r.name)).string(), page(r.title, body));

        rows += fmt::format("<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}{}</td><td class=\"num\">{}</td>"
                            "<td class=\"num\">{}</td></tr>\n",
                            page_of(r.name), escape(r.title), escape(r.ids), status_html(r), verdicts_html(r), time_text(r),
                            figures.size());
    }
    std::string body = "<h1>xgrad tutorials: the LayerNorm articles, checked</h1>\n";
    body += fmt::format("<p class=\"meta\">{} · {} programs · tutorial outputs in <code>{}</code></p>\n", stamp, runs.size(),
                        escape(in.out_dir));
    body += "<p>One page per program: its verdicts (the <code>=&gt;</code> lines it printed), where the articles say "
            "otherwise, its figures, its whole output and its guide.</p>\n";
    body += "<table>\n<tr><th>tutorial</th><th>article examples</th><th>verdicts</th><th>time</th><th>figures</th></tr>\n" + rows +
            "</table>\n";
    const std::string index = (fs::path(in.report_dir) / "index.html").string();
    write_file(index, page("xgrad tutorials", body));
    return index;
}

}  // namespace xg::tutorial::runner
