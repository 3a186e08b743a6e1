/* The "paste a stack trace" page: match pasted lines against the runbooks' own signatures.
   The patterns (assets/signatures.js) are the detectors' signatures, frames and exception classes, converted to
   JavaScript when the site was built; nothing pasted here is sent anywhere. */
(function () {
  "use strict";

  var FR = (window.FlinkRunbooks = window.FlinkRunbooks || {});
  var root = document.body.getAttribute("data-root") || "";
  var data = FR.signatures || { runbooks: [], frame_line: "^\\s*at " };
  var frameLine = new RegExp(data.frame_line);
  var KIND_LABEL = { signature: "signature", exception: "exception class", frame: "stack frame" };
  var LINES_SHOWN = 3;

  // Compile every pattern once; a pattern that does not compile is recorded, never silently dropped.
  var compiled = [];
  var errors = [];
  var patternCount = 0;
  data.runbooks.forEach(function (rb) {
    var patterns = [];
    rb.patterns.forEach(function (p) {
      patternCount += 1;
      try {
        patterns.push({ pattern: p, re: new RegExp(p.js, p.flags) });
      } catch (e) {
        errors.push({ slug: rb.slug, kind: p.kind, source: p.source, error: String(e) });
      }
    });
    compiled.push({ runbook: rb, patterns: patterns });
  });

  function match(text) {
    var lines = String(text || "").split(/\r\n|\r|\n/);
    var results = [];
    compiled.forEach(function (c) {
      var hits = [];
      var score = 0;
      c.patterns.forEach(function (cp) {
        var at = [];
        for (var i = 0; i < lines.length; i++) {
          if (cp.pattern.kind === "frame" && !frameLine.test(lines[i])) continue;
          var m = cp.re.exec(lines[i]);
          if (m) at.push({ line: i + 1, text: lines[i], start: m.index, end: m.index + m[0].length });
        }
        if (at.length) {
          score += cp.pattern.weight;
          hits.push({ pattern: cp.pattern, lines: at });
        }
      });
      if (hits.length) {
        hits.sort(function (a, b) { return b.pattern.weight - a.pattern.weight || a.lines[0].line - b.lines[0].line; });
        results.push({ runbook: c.runbook, score: Math.round(score * 100) / 100, hits: hits });
      }
    });
    results.sort(function (a, b) {
      return b.score - a.score || a.runbook.title.localeCompare(b.runbook.title);
    });
    return { lines: lines.length, results: results };
  }

  FR.trace = { patterns: patternCount, compiled: patternCount - errors.length, errors: errors, match: match };

  // ------------------------------------------------------------------------------------------- rendering
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function markedLine(hit) {
    var code = el("code", "line");
    code.appendChild(document.createTextNode(hit.text.slice(0, hit.start)));
    code.appendChild(el("mark", "", hit.text.slice(hit.start, hit.end)));
    code.appendChild(document.createTextNode(hit.text.slice(hit.end)));
    return code;
  }

  function renderResult(result, best) {
    var rb = result.runbook;
    var li = el("li", "trace-match" + (best ? " best" : ""));
    li.setAttribute("data-slug", rb.slug);
    var h2 = el("h2");
    var a = el("a", "", rb.title);
    a.href = root + rb.url;
    h2.appendChild(a);
    if (best) h2.appendChild(el("span", "badge badge-best", "best match"));
    h2.appendChild(el("span", "score", "strength " + result.score.toFixed(2)));
    li.appendChild(h2);
    li.appendChild(el("p", "muted", rb.slug + " · Flink " + rb.versions));

    var table = el("table", "why");
    var head = el("thead");
    var hr = el("tr");
    ["Line", "What matched", "Why"].forEach(function (t) { var th = el("th", "", t); th.scope = "col"; hr.appendChild(th); });
    head.appendChild(hr);
    table.appendChild(head);
    var body = el("tbody");
    result.hits.forEach(function (hit) {
      hit.lines.slice(0, LINES_SHOWN).forEach(function (line, index) {
        var tr = el("tr");
        tr.setAttribute("data-kind", hit.pattern.kind);
        tr.appendChild(el("td", "ln", String(line.line)));
        var text = el("td", "text");
        text.appendChild(markedLine(line));
        tr.appendChild(text);
        var why = el("td", "by");
        if (index === 0) {
          why.appendChild(el("span", "kind", KIND_LABEL[hit.pattern.kind] || hit.pattern.kind));
          why.appendChild(document.createTextNode(" "));
          why.appendChild(el("code", "regex", hit.pattern.source));
          if (hit.pattern.shared_by > 1) {
            why.appendChild(el("span", "muted shared", " shared with " + (hit.pattern.shared_by - 1) + " other runbook"
              + (hit.pattern.shared_by > 2 ? "s" : "")));
          }
        } else {
          why.appendChild(el("span", "muted", "same pattern"));
        }
        tr.appendChild(why);
        body.appendChild(tr);
      });
      if (hit.lines.length > LINES_SHOWN) {
        var more = el("tr", "more");
        more.appendChild(el("td", "ln", ""));
        var cell = el("td", "muted", "and " + (hit.lines.length - LINES_SHOWN) + " more line(s) matching the same pattern");
        cell.colSpan = 2;
        more.appendChild(cell);
        body.appendChild(more);
      }
    });
    table.appendChild(body);
    li.appendChild(table);
    return li;
  }

  function setup() {
    var form = document.getElementById("trace-form");
    var input = document.getElementById("trace-input");
    var list = document.getElementById("trace-results");
    var status = document.getElementById("trace-status");
    if (!form || !input || !list) return;
    var timer = null;

    function run() {
      list.textContent = "";
      var text = input.value;
      if (!text.trim()) {
        status.textContent = "";
        return;
      }
      var outcome = match(text);
      var n = outcome.results.length;
      status.textContent = n
        ? n + " runbook" + (n > 1 ? "s match" : " matches") + " (" + outcome.lines + " lines looked at)."
        : "No runbook matches these " + outcome.lines + " lines. Paste the whole trace, including its Caused by: lines.";
      outcome.results.forEach(function (result, i) { list.appendChild(renderResult(result, i === 0)); });
    }

    form.addEventListener("submit", function (event) {
      event.preventDefault();
      run();
    });
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(run, 250);
    });
    document.getElementById("trace-clear").addEventListener("click", function () {
      input.value = "";
      run();
      input.focus();
    });
    if (errors.length) {
      status.textContent = errors.length + " pattern(s) could not be compiled by this browser.";
    }
  }

  setup();
})();
