#!/usr/bin/python3
"""Loads every page of the tutorial report in headless Chromium and fails on anything a reader would
meet as broken: a console error or uncaught exception, a request that failed or left the report's
folder, an image that did not load or has no size, a figure shrunk below 90 % of its own width (its
12 px text would read as 8 px), a link to an anchor (#x, or page.html#x) that no element of that
page has as its id, a verdict without its claim ID and status; with --outputs, a saved program
output that still holds a terminal's redraws (carriage returns, escape sequences). Saves a
screenshot of the index (and of any page named with --screenshot).

  check_report.py REPORT_DIR --screenshot-dir DIR [--screenshot PAGE.html]... [--outputs OUT_DIR]

Chromium is driven over the DevTools protocol on a pipe (--remote-debugging-pipe: it reads
commands from fd 3 and writes replies and events to fd 4, JSON messages separated by NUL bytes),
so Python's standard library is all it needs. Debian's package: chromium.
"""
import argparse
import base64
import fcntl
import json
import os
import pathlib
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time

PAGE_LOAD_SECONDS = 20


class Browser:
    def __init__(self, executable, profile):
        to_chrome_r, to_chrome_w = os.pipe()
        from_chrome_r, from_chrome_w = os.pipe()
        # Above 4, so that placing them at 3 and 4 in the child cannot overwrite one another.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_chrome_r, from_chrome_w)]
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)

        def place_pipes():
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        self.process = subprocess.Popen(
            [executable, "--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe",
             "--user-data-dir=" + profile, "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--mute-audio", "--hide-scrollbars", "about:blank"],
            preexec_fn=place_pipes, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        for fd in high:
            os.close(fd)
        self.write_fd, self.read_fd = to_chrome_w, from_chrome_r
        self.buffer = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe (exit code %s)" % self.process.poll())
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method, params=None, session=None, timeout=PAGE_LOAD_SECONDS):
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply is None:
                raise RuntimeError("no reply to %s within %s s" % (method, timeout))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError("%s failed: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for i, e in enumerate(self.events):
                if e.get("method") == event:
                    del self.events[i]
                    return e
            message = self._read_message(deadline)
            if message is None:
                return None
            self.events.append(message)

    def drain(self, seconds):
        deadline = time.monotonic() + seconds
        while (message := self._read_message(deadline)) is not None:
            self.events.append(message)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


IMAGES = """Array.from(document.images).map(i => {
  const box = i.getBoundingClientRect();
  return {src: i.getAttribute('src'), complete: i.complete, natural: [i.naturalWidth, i.naturalHeight],
          shown: [box.width, box.height], figure: i.closest('figure') !== null};
})"""
# The verdicts shown without their claim ID or status.
UNLABELLED = """Array.from(document.querySelectorAll('.verdict')).filter(v =>
  !v.querySelector('.vid') || !v.querySelector('.vid').textContent.trim() || !v.querySelector('.status'))
  .map(v => v.textContent.slice(0, 80))"""
# The in-page anchors no element has as its id.
DEAD_ANCHORS = """(() => {
  const ids = new Set(Array.from(document.querySelectorAll('[id]')).map(e => e.id));
  return Array.from(document.querySelectorAll('a[href^="#"]')).map(a => a.getAttribute('href'))
    .filter(h => !ids.has(decodeURIComponent(h.slice(1))));
})()"""
LINKS = "Array.from(document.querySelectorAll('a[href]')).map(a => a.getAttribute('href'))"
SIZE = "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]"


def problems_in_events(events, report_url):
    problems = []
    for e in events:
        method, p = e.get("method"), e.get("params", {})
        if method == "Runtime.exceptionThrown":
            problems.append("uncaught exception: %s" % p["exceptionDetails"].get("text"))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            problems.append("console %s: %s" % (p["type"], [a.get("value") for a in p.get("args", [])]))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            problems.append("console error: %s %s" % (p["entry"].get("text"), p["entry"].get("url", "")))
        elif method == "Network.requestWillBeSent":
            url = p["request"]["url"]
            if not (url.startswith(report_url) or url.startswith("data:") or url == "about:blank"):
                problems.append("request outside the report's folder: %s" % url)
        elif method == "Network.loadingFailed":
            problems.append("failed request: %s (%s)" % (p.get("requestId"), p.get("errorText")))
    return problems


def screenshot(browser, session, path):
    width, height = browser.send("Runtime.evaluate", {"expression": SIZE, "returnByValue": True}, session)["result"]["value"]
    clip = {"x": 0, "y": 0, "width": min(width, 1280), "height": min(height, 1600), "scale": 1}
    shot = browser.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True}, session)
    pathlib.Path(path).write_bytes(base64.b64decode(shot["data"]))


def static_problems(html_path):
    """Attributes that would reach outside the folder even if the browser never followed them."""
    text = html_path.read_text(encoding="utf-8")
    return ["%s points outside the report: %s" % (html_path.name, m.group(0))
            for m in re.finditer(r'(?:src|href)="(?:[a-z][a-z0-9+.-]*:|//|/)[^"]*"', text, re.I)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report_dir")
    parser.add_argument("--screenshot-dir", required=True)
    parser.add_argument("--screenshot", action="append", default=[], help="also save a screenshot of this page")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "chromium")
    parser.add_argument("--outputs", help="the runner's --out directory: its saved outputs (*.txt) are checked too")
    args = parser.parse_args()

    report = pathlib.Path(args.report_dir).resolve()
    pages = sorted(report.glob("*.html"))
    if not (report / "index.html").exists():
        sys.exit("check_report: no index.html in %s" % report)
    if not shutil.which(args.chromium):
        sys.exit("check_report: chromium not found (Debian package chromium; bash scripts/setup.sh test installs it)")
    report_url = report.as_uri() + "/"
    os.makedirs(args.screenshot_dir, exist_ok=True)

    problems = []
    for page in pages:
        problems += static_problems(page)
    if args.outputs:
        saved = sorted(pathlib.Path(args.outputs).glob("*.txt"))
        if not saved:
            problems.append("no saved output (*.txt) in %s" % args.outputs)
        for txt in saved:
            if re.search(r"[\r\x1b]", txt.read_text(encoding="utf-8", errors="replace")):
                problems.append("%s keeps a terminal's redraws (carriage return or escape sequence)" % txt.name)
    with tempfile.TemporaryDirectory(prefix="xgrad-chromium-") as profile:
        browser = Browser(args.chromium, profile)
        try:
            target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                browser.send(domain + ".enable", session=session)
            browser.send("Emulation.setDeviceMetricsOverride",
                         {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session)
            linked = set()
            anchored = set()  # (page, "other.html#x")
            for page in pages:
                browser.events.clear()
                browser.send("Page.navigate", {"url": page.as_uri()}, session)
                if browser.wait_for("Page.loadEventFired", PAGE_LOAD_SECONDS) is None:
                    problems.append("%s: did not finish loading in %s s" % (page.name, PAGE_LOAD_SECONDS))
                    continue
                browser.drain(0.3)  # late console messages
                found = ["%s: %s" % (page.name, p) for p in problems_in_events(browser.events, report_url)]
                images = browser.send("Runtime.evaluate", {"expression": IMAGES, "returnByValue": True}, session)["result"]["value"]
                for img in images:
                    if not img["complete"] or min(img["natural"]) <= 0 or min(img["shown"]) <= 0:
                        found.append("%s: image %s did not load or has no size (natural %s, shown %s)"
                                     % (page.name, img["src"], img["natural"], img["shown"]))
                    elif img["figure"] and img["shown"][0] < 0.9 * img["natural"][0]:
                        found.append("%s: figure %s shown %d px wide, below 90 %% of its own %d px (its text unreadable)"
                                     % (page.name, img["src"], img["shown"][0], img["natural"][0]))
                dead = browser.send("Runtime.evaluate", {"expression": DEAD_ANCHORS, "returnByValue": True}, session)["result"]["value"]
                found += ["%s: link %s leads to no element of the page (no id %s)" % (page.name, h, h[1:]) for h in dead]
                unlabelled = browser.send("Runtime.evaluate", {"expression": UNLABELLED, "returnByValue": True}, session)["result"]["value"]
                found += ["%s: a verdict without its claim ID or status: %s" % (page.name, v) for v in unlabelled]
                links = browser.send("Runtime.evaluate", {"expression": LINKS, "returnByValue": True}, session)["result"]["value"]
                linked.update(l.split("#")[0] for l in links if not l.startswith("#"))
                anchored.update((page.name, l) for l in links if "#" in l and not l.startswith("#"))
                print("check_report: %-40s %d images, %d links, %s" % (page.name, len(images), len(links),
                                                                       "ok" if not found else "%d problems" % len(found)))
                problems += found
                if page.name == "index.html" or page.name in args.screenshot:
                    shot = os.path.join(args.screenshot_dir, page.stem + ".png")
                    screenshot(browser, session, shot)
                    print("check_report: screenshot %s" % shot)
            for page in pages:
                if page.name != "index.html" and page.name not in linked:
                    problems.append("%s: no page links to it" % page.name)
            missing = sorted(l for l in linked if l and not (report / l).exists())
            for source, link in sorted(anchored):
                target, anchor = link.split("#", 1)
                path = report / target
                if path.exists() and not re.search(r'\bid="%s"' % re.escape(anchor), path.read_text(encoding="utf-8")):
                    problems.append("%s: link %s leads to no element of %s (no id %s)" % (source, link, target, anchor))
            problems += ["a link to %s, which is not in the report" % l for l in missing]
        finally:
            browser.close()
    for p in problems:
        print("check_report: PROBLEM " + p)
    print("check_report: %d pages, %d problems" % (len(pages), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
