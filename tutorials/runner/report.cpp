#include "tutorials/runner/report.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

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

// GitHub's anchor of a heading: its text lower-cased, spaces to '-', punctuation and symbols
// dropped (letters, digits, '-' and '_' kept), "-1", "-2" ... after a repeat. The guides link
// their own sections so ("[Checkpoints](#checkpoints)"); cmark-gfm gives headings no ids.
std::string github_slug(const std::string& text, std::map<std::string, int>& seen) {
    std::string slug;
    for (std::size_t i = 0; i < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        const std::size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (c < 0x80) {
            if (std::isalnum(c) || c == '-' || c == '_') slug += static_cast<char>(std::tolower(c));
            else if (c == ' ') slug += '-';
        } else {
            char32_t cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
            for (std::size_t k = 1; k < n && i + k < text.size(); ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
            const bool letter = (cp >= 0xC0 && cp <= 0x24F && cp != 0xD7 && cp != 0xF7) || (cp >= 0x370 && cp <= 0x3FF) ||
                                cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0x2070 && cp <= 0x209F) ||
                                (cp >= 0x4E00 && cp <= 0x9FFF);
            if (letter) slug += text.substr(i, n);
        }
        i += n;
    }
    const int repeat = seen[slug]++;
    return repeat == 0 ? slug : slug + "-" + std::to_string(repeat);
}

std::string unescape(const std::string& s) {
    std::string out = std::regex_replace(s, std::regex("<[^>]*>"), "");
    for (const auto& [entity, c] : std::vector<std::pair<std::string, std::string>>{
             {"&lt;", "<"}, {"&gt;", ">"}, {"&quot;", "\""}, {"&#39;", "'"}, {"&amp;", "&"}}) {
        for (std::size_t at; (at = out.find(entity)) != std::string::npos;) out.replace(at, entity.size(), c);
    }
    return out;
}

std::string with_heading_ids(const std::string& html) {
    static const std::regex heading(R"re(<h([1-6])>(.*?)</h\1>)re");
    std::map<std::string, int> seen;
    std::string out;
    std::size_t pos = 0;
    for (auto it = std::sregex_iterator(html.begin(), html.end(), heading); it != std::sregex_iterator(); ++it) {
        out += html.substr(pos, static_cast<std::size_t>(it->position()) - pos);
        pos = static_cast<std::size_t>(it->position() + it->length());
        out += fmt::format("<h{0} id=\"{1}\">{2}</h{0}>", (*it)[1].str(), escape(github_slug(unescape((*it)[2].str()), seen)),
                           (*it)[2].str());
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
.verdict { margin: 0.3rem 0; }
.verdict pre { margin: 0.1rem 0 0 0; white-space: pre-wrap; font-size: 0.8rem; padding: 0.3rem 0.5rem; }
.vid { font-weight: bold; font-family: monospace; }
.status { font-size: 0.8rem; padding: 0 0.3rem; border-radius: 0.2rem; }
.st-holds { background: #d4edda; } .st-partly { background: #fff3cd; } .st-not-shown { background: #f8d7da; }
.st-cannot-decide { background: #d6e4f0; } .st-stated { background: #eee; }
td.count { text-align: center; }
.failed { color: #b00; font-weight: bold; }
.none { color: #777; font-style: italic; }
figure { margin: 1rem 0 1rem calc(50% - 50vw + 1rem); width: calc(100vw - 2rem); overflow-x: auto; }
figure img { max-width: none; border: 1px solid #ddd; background: white; }
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

std::string status_class(const std::string& status) {
    std::string c = "st-" + status;
    std::replace(c.begin(), c.end(), ' ', '-');
    return c;
}

// Each verdict whole, as printed (its wrapped lines kept apart), under its claim ID and status.
std::string verdicts_html(const TutorialRun& r) {
    const auto v = r.verdict_blocks();
    if (v.empty()) return "<span class=\"none\">no =&gt; verdict printed: see the guide</span>";
    std::string s;
    for (const auto& b : v) {
        std::string text = "=&gt; " + escape(b.lines.front());
        for (std::size_t i = 1; i < b.lines.size(); ++i) text += "\n   " + escape(b.lines[i]);
        s += fmt::format("<div class=\"verdict\"><span class=\"vid\">{}</span> <span class=\"status {}\">{}</span><pre>{}</pre></div>",
                         escape(b.id), status_class(b.status), escape(b.status), text);
    }
    return s;
}

// The SVG's own width in CSS pixels (its width="..." attribute: px from gnuplot, pt from
// Graphviz, 1 pt = 4/3 px), 0 when not found.
int svg_width(const std::string& path) {
    std::ifstream in(path);
    std::string head(2048, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    head.resize(static_cast<std::size_t>(in.gcount()));
    std::smatch m;
    if (!std::regex_search(head, m, std::regex(R"re(<svg[^>]*\swidth="(\d+(?:\.\d+)?)(pt|px)?")re"))) return 0;
    const double width = std::stod(m[1]);
    return static_cast<int>(std::lround(m[2] == "pt" ? width * 4 / 3 : width));
}

// At its own width (gnuplot's 12 px text stays 12 px; a figure wider than the page scrolls), a
// link to the figure alone for the full view.
std::string figure_html(const std::string& file, int width, const std::string& seeds, const ReportInputs& in) {
    return fmt::format("<figure><a href=\"figures/{0}\" title=\"the figure alone, full size\"><img src=\"figures/{0}\" alt=\"{0}\"{3}></a>"
                       "<figcaption>{0}: seeds {1}; commit {2} (click for the figure alone)</figcaption></figure>\n",
                       escape(file), escape(seeds.empty() ? "none (fixed inputs)" : seeds), escape(in.commit),
                       width > 0 ? fmt::format(" width=\"{}\"", width) : "");
}

}  // namespace

std::size_t verdict_continues(const std::string& line, std::size_t verdict_indent) {
    const std::size_t text = verdict_indent + 3;  // "=> " then the text; a wrapped verdict continues under it
    return line.size() > text && line.find_first_not_of(' ') == text;
}

std::string Verdict::text() const {
    std::string s;
    for (const auto& line : lines) s += (s.empty() ? "" : " ") + line;
    return s;
}

std::string verdict_status(const std::string& text) {
    static const std::vector<std::pair<std::regex, std::string>> words{
        {std::regex(R"(\bcannot (decide|tell)\b)", std::regex::icase), "cannot decide"},
        {std::regex(R"(\b(partly|half of it)\b)", std::regex::icase), "partly"},
        {std::regex(R"(\b(not shown|does not hold|do not hold|not at this scale|no sign|does not show)\b)", std::regex::icase),
         "not shown"},
        {std::regex(R"(\b(holds|held there|reproduced)\b)", std::regex::icase), "holds"},
    };
    std::string status = "stated";
    std::size_t first = std::string::npos;
    for (const auto& [word, name] : words) {
        std::smatch m;
        if (std::regex_search(text, m, word) && static_cast<std::size_t>(m.position()) < first) {
            first = static_cast<std::size_t>(m.position());
            status = name;
        }
    }
    return status;
}

std::vector<Verdict> TutorialRun::verdict_blocks() const {
    static const std::regex claim_id(R"(\b[AP]\d+\.\d+\b)");
    std::vector<Verdict> v;
    std::string section = "-";
    std::size_t indent = std::string::npos;  // of the "=>" of the verdict being read
    for (const auto& line : output) {
        const std::string t = trimmed(line);
        if (line.rfind('[', 0) == 0 && line.find(']') != std::string::npos) section = line.substr(1, line.find(']') - 1);
        if (t.rfind("=> ", 0) == 0) {
            v.push_back({section, {t.substr(3)}, ""});
            indent = line.size() - t.size();
        } else if (indent != std::string::npos && verdict_continues(line, indent)) {
            v.back().lines.push_back(t);
        } else {
            indent = std::string::npos;
        }
    }
    for (Verdict& b : v) {
        const std::string text = b.text();
        b.status = verdict_status(text);
        // A verdict that names one of its section's claims speaks to that one ("(A4.3)").
        for (auto it = std::sregex_iterator(text.begin(), text.end(), claim_id); it != std::sregex_iterator(); ++it) {
            if (b.id.find(it->str()) != std::string::npos) {
                b.id = it->str();
                break;
            }
        }
    }
    return v;
}

std::vector<std::string> TutorialRun::verdicts() const {
    std::vector<std::string> v;
    for (const Verdict& b : verdict_blocks()) v.push_back(b.text());
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
    // The list of claims (docs/tutorials/claims.md) is a page of its own; the guides link it.
    const fs::path claims_md = fs::path(in.source_dir) / "docs/tutorials/claims.md";
    const bool have_claims = fs::exists(claims_md);
    if (have_claims) guide_to_page["claims.md"] = "claims.html";
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
                const fs::path svg = fs::path(in.out_dir) / f;
                fs::copy_file(svg, fs::path(in.report_dir) / "figures" / f, fs::copy_options::overwrite_existing);
                body += figure_html(f, svg_width(svg.string()), seeds_of_figure(svg.string()), in);
            }
        }
        body += "<h2>Output of this run</h2>\n<pre>";
        for (const auto& line : r.output) body += escape(line) + "\n";
        body += "</pre>\n";
        if (!r.guide.empty()) {
            const std::string markdown = read_file((fs::path(in.source_dir) / r.guide).string());
            body += "<section class=\"guide\">\n<p class=\"meta\">the guide, " + escape(r.guide) + ":</p>\n" +
                    localise_links(with_heading_ids(render_markdown(markdown)), guide_to_page) + "</section>\n";
        }
        write_file((fs::path(in.report_dir) / page_of(r.name)).string(), page(r.title, body));

        rows += fmt::format("<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}{}</td><td class=\"num\">{}</td>"
                            "<td class=\"num\">{}</td></tr>\n",
                            page_of(r.name), escape(r.title), escape(r.ids), status_html(r), verdicts_html(r), time_text(r),
                            figures.size());
    }
    if (have_claims) {
        const std::string body = "<nav><a href=\"index.html\">all tutorials</a></nav>\n<p class=\"meta\">docs/tutorials/claims.md</p>\n" +
                                 localise_links(with_heading_ids(render_markdown(read_file(claims_md.string()))), guide_to_page);
        write_file((fs::path(in.report_dir) / "claims.html").string(), page("The claims the tutorials test", body));
    }

    // The start page: where to begin, the claims, what the verdicts say of each, then the programs.
    std::string body = "<h1>xgrad tutorials: the LayerNorm articles, checked</h1>\n";
    body += fmt::format("<p class=\"meta\">{} · {} programs · tutorial outputs in <code>{}</code></p>\n", stamp, runs.size(),
                        escape(in.out_dir));
    body += "<h2 id=\"start\">Where to begin</h2>\n<p>";
    if (!runs.empty()) {
        body += fmt::format("Start with <a href=\"{}\">{}</a> and go on in order with each page's <em>next</em> link: the "
                            "first programs compute LayerNorm on fixed inputs, the later ones (from 09) train models and "
                            "weigh the articles' claims over several seeds. ",
                            page_of(runs.front().name), escape(runs.front().title));
    }
    body += "Each page has the program's verdicts (the <code>=&gt;</code> lines it printed), where the articles say "
            "otherwise, its figures, its whole output and its guide.";
    if (have_claims) {
        body += " <a href=\"claims.html\">The claims</a> lists every claim tested, with its ID (A0.1 … from the five "
                "articles, P… from later papers and bug reports), its source and what was found.";
    }
    body += " This run used each program's quick settings: where a quick run cannot decide, its verdict says so and "
            "quotes the <code>--full</code> run its guide pastes.</p>\n";

    // Per claim ID, the verdicts of this run by what they say: the claims in claims.md's order
    // (with their text), then the sections that are not claims. A verdict of a section on two
    // claims ("A0.5 / A4.3") that names neither counts for both.
    const std::vector<std::string> statuses{"holds", "partly", "not shown", "cannot decide", "stated"};
    std::vector<std::pair<std::string, std::string>> claims;  // ID, "(source): text"
    if (have_claims) {
        static const std::regex listed(R"(^- \*\*([AP]\d+\.\d+)\*\* (\((?:article|paper|issue) [^)]*\): .+)$)");
        std::istringstream lines(read_file(claims_md.string()));
        for (std::string line; std::getline(lines, line);) {
            std::smatch m;
            if (std::regex_match(line, m, listed)) claims.emplace_back(m[1], m[2]);
        }
    }
    std::vector<std::string> ids;
    for (const auto& c : claims) ids.push_back(c.first);
    std::map<std::string, std::map<std::string, int>> counts;
    std::map<std::string, std::vector<std::string>> pages_of_id;
    for (const auto& r : runs) {
        for (const Verdict& v : r.verdict_blocks()) {
            std::vector<std::string> targets;
            static const std::regex claim_id(R"([AP]\d+\.\d+)");
            for (auto it = std::sregex_iterator(v.id.begin(), v.id.end(), claim_id); it != std::sregex_iterator(); ++it)
                targets.push_back(it->str());
            if (targets.empty()) targets.push_back(v.id);
            for (const auto& id : targets) {
                if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
                ++counts[id][v.status];
                auto& pages = pages_of_id[id];
                const std::string link =
                    fmt::format("<a href=\"{}\">{}</a>", page_of(r.name), escape(r.name.substr(0, r.name.find('_'))));
                if (std::find(pages.begin(), pages.end(), link) == pages.end()) pages.push_back(link);
            }
        }
    }
    body += "<h2 id=\"claims\">The claims, and what this run's verdicts say of each</h2>\n<p>Each <code>=&gt;</code> verdict is "
            "counted under the claim ID it names or the section it stands in, by the first of its words: <em>holds</em>, "
            "<em>partly</em>, <em>not shown</em> (also \"does not hold\", \"no sign\"), <em>cannot decide</em>; "
            "<em>stated</em>: a result shown, no claim weighed. A claim without counts has no verdict in this run (its "
            "program was not run, or its guide discusses it); a section on two claims counts its verdicts for both. Rows without a claim are the programs' own sections "
            "(04.1, DP, …).</p>\n<table>\n<tr><th>ID</th><th>claim</th>";
    for (const auto& st : statuses) body += "<th>" + escape(st) + "</th>";
    body += "<th>programs</th></tr>\n";
    std::map<std::string, int> totals;
    for (const auto& id : ids) {
        const auto claim = std::find_if(claims.begin(), claims.end(), [&](const auto& c) { return c.first == id; });
        body += "<tr><td>" + escape(id) + "</td><td>" +
                (claim == claims.end() ? std::string("<span class=\"none\">a section of its program</span>") : escape(claim->second)) +
                "</td>";
        for (const auto& st : statuses) {
            const int n = counts[id].count(st) ? counts[id][st] : 0;
            totals[st] += n;
            body += fmt::format("<td class=\"count\">{}</td>", n ? std::to_string(n) : "");
        }
        std::string pages;
        for (const auto& link : pages_of_id[id]) pages += (pages.empty() ? "" : ", ") + link;
        body += "<td>" + (pages.empty() ? std::string("-") : pages) + "</td></tr>\n";
    }
    body += "<tr><th>all</th><th></th>";
    for (const auto& st : statuses) body += fmt::format("<th class=\"count\">{}</th>", totals[st]);
    body += "<th></th></tr>\n</table>\n";

    body += "<h2 id=\"programs\">The programs and their verdicts</h2>\n";
    body += "<table>\n<tr><th>tutorial</th><th>article examples</th><th>verdicts</th><th>time</th><th>figures</th></tr>\n" + rows +
            "</table>\n";
    const std::string index = (fs::path(in.report_dir) / "index.html").string();
    write_file(index, page("xgrad tutorials", body));
    return index;
}

}  // namespace xg::tutorial::runner
