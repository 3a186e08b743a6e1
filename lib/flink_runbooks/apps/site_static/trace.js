/* The "paste a stack trace" page: which runbook explains a pasted trace, ranked as `flink-runbooks diagnose` ranks
   its findings. The patterns (assets/signatures.js) are the detectors' own declarations, converted to JavaScript
   when the site was built; nothing pasted here is sent anywhere.

   Ranking: the deepest cause of the exception chain names the failure, wrappers only carry it. A runbook matches
   when Flink's wording of its failure (or a message it looks for) is in the trace; the deeper that message, the
   better; Flink's wording beats a signature; a root cause beats a wrapper and an umbrella outcome (the detector's
   layer). Exception classes and stack frames support a match but never make one on their own. */
(function () {
  "use strict";

  var FR = (window.FlinkRunbooks = window.FlinkRunbooks || {});
  var root = document.body.getAttribute("data-root") || "";
  var data = FR.signatures || { runbooks: [], frame_line: "^\\s*at ", unrecognised: null };
  var frameLine = new RegExp(data.frame_line);
  var causedBy = /^\s*(?:Caused by|Suppressed):/;
  var logRecordStart = /^\s*\[?\d{4}-\d{2}-\d{2}[ T]\d/;
  var outermostException = /^[\w$.]+\.[\w$]*(?:Exception|Error|Throwable)(?::|\s*$)/; // a new trace, without a log record
  var MESSAGE_KINDS = { wording: 2, signature: 1 };
  var LINES_SHOWN = 3;
  var EXCERPT = 160; // characters of a long line shown around what matched

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

  // A trace copied out of JSON or a ticket arrives on one line with its line breaks as the text "\n" and "\t".
  function unescape(text) {
    var escaped = (text.match(/\\n/g) || []).length;
    var real = (text.match(/\n/g) || []).length;
    if (escaped < 2 || real >= escaped) return text;
    return text.replace(/\\r\\n|\\n|\\r/g, "\n").replace(/\\t/g, "\t");
  }

  // Every line with its depth in its exception chain: 0 for a log record or the outermost exception, one more
  // for each "Caused by:".
  function readLines(text) {
    var depth = 0;
    return unescape(String(text || "")).split(/\r\n|\r|\n/).map(function (line, i) {
      var frame = frameLine.test(line);
      if (!frame) {
        if (causedBy.test(line)) depth += 1;
        else if (logRecordStart.test(line) || outermostException.test(line)) depth = 0;
      }
      return { number: i + 1, text: line, frame: frame, depth: depth };
    });
  }

  function match(text) {
    var lines = readLines(text);
    var deepest = 0;
    lines.forEach(function (l) { if (!l.frame && l.text.trim()) deepest = Math.max(deepest, l.depth); });
    var results = [];
    compiled.forEach(function (c) {
      var hits = [];
      var weight = 0;
      var messageDepth = -1;
      var messageKind = 0;
      c.patterns.forEach(function (cp) {
        var kind = cp.pattern.kind;
        var at = [];
        lines.forEach(function (line) {
          if ((kind === "frame") !== line.frame) return; // frames only on "at …" lines, the rest never there
          var m = cp.re.exec(line.text);
          if (m) at.push({ line: line.number, depth: line.depth, text: line.text, start: m.index, end: m.index + m[0].length });
        });
        if (!at.length) return;
        weight += cp.pattern.weight;
        hits.push({ pattern: cp.pattern, lines: at });
        if (MESSAGE_KINDS[kind]) {
          at.forEach(function (l) {
            if (l.depth > messageDepth || (l.depth === messageDepth && MESSAGE_KINDS[kind] > messageKind)) {
              messageDepth = l.depth;
              messageKind = MESSAGE_KINDS[kind];
            }
          });
        }
      });
      if (messageDepth < 0) return; // exception classes and frames alone never make a match
      hits.sort(function (a, b) {
        return (MESSAGE_KINDS[b.pattern.kind] || 0) - (MESSAGE_KINDS[a.pattern.kind] || 0)
          || maxDepth(b) - maxDepth(a) || a.lines[0].line - b.lines[0].line;
      });
      results.push({ runbook: c.runbook, depth: messageDepth, kind: messageKind, weight: weight,
                     deepest: messageDepth === deepest, hits: hits });
    });
    results.sort(function (a, b) {
      return b.depth - a.depth || b.kind - a.kind || (a.runbook.layer || 0) - (b.runbook.layer || 0)
        || b.weight - a.weight || a.runbook.title.localeCompare(b.runbook.title);
    });
    return { lines: lines.length, deepest: deepest, results: results };
  }

  function maxDepth(hit) {
    return hit.lines.reduce(function (d, l) { return Math.max(d, l.depth); }, 0);
  }

  FR.trace = { patterns: patternCount, compiled: patternCount - errors.length, errors: errors, match: match };

  // ------------------------------------------------------------------------------------------- rendering
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // The matched part of a line and some context: a one-line paste is not reprinted whole for every pattern.
  function markedLine(hit) {
    var from = 0;
    var to = hit.text.length;
    if (to > EXCERPT) {
      from = Math.max(0, hit.start - 40);
      to = Math.min(hit.text.length, Math.max(hit.end, from + EXCERPT));
    }
    var code = el("code", "line");
    code.appendChild(document.createTextNode((from > 0 ? "…" : "") + hit.text.slice(from, hit.start)));
    code.appendChild(el("mark", "", hit.text.slice(hit.start, hit.end)));
    code.appendChild(document.createTextNode(hit.text.slice(hit.end, to) + (to < hit.text.length ? "…" : "")));
    return code;
  }

  function whyTable(result) {
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
        var why = el("td", "by", index === 0 ? hit.pattern.message : "the same");
        if (index === 0 && hit.pattern.shared_by > 1) {
          why.appendChild(el("span", "muted shared", " (" + (hit.pattern.shared_by - 1) + " other runbook"
            + (hit.pattern.shared_by > 2 ? "s" : "") + " read this too)"));
        }
        tr.appendChild(why);
        body.appendChild(tr);
      });
      if (hit.lines.length > LINES_SHOWN) {
        var more = el("tr", "more");
        more.appendChild(el("td", "ln", ""));
        var cell = el("td", "muted", "and " + (hit.lines.length - LINES_SHOWN) + " more line(s) like these");
        cell.colSpan = 2;
        more.appendChild(cell);
        body.appendChild(more);
      }
    });
    table.appendChild(body);
    var scroll = el("div", "table-scroll");
    scroll.appendChild(table);
    return scroll;
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
    li.appendChild(h2);
    var where = result.deepest ? "in the deepest cause of the trace" : "in a wrapping exception, not the deepest cause";
    li.appendChild(el("p", "muted", (result.kind === 2 ? "Flink's own message for this failure, " : "A message this runbook looks for, ")
      + where + " · Flink " + rb.versions));
    if (best) {
      li.appendChild(whyTable(result));
    } else {
      var details = el("details");
      details.appendChild(el("summary", "", "Why"));
      details.appendChild(whyTable(result));
      li.appendChild(details);
    }
    return li;
  }

  function renderNoMatch(list, outcome) {
    var li = el("li", "trace-none");
    li.appendChild(el("h2", "", "No match: nothing in the catalogue matches this trace"));
    var p = el("p");
    p.appendChild(document.createTextNode("No runbook recognises a message of these " + outcome.lines
      + " lines (stack frames and exception classes alone do not make a match). Run "));
    p.appendChild(el("code", "", "flink-runbooks diagnose -"));
    p.appendChild(document.createTextNode(" and paste the trace (or pass the log files) to see what the logs around it say"));
    if (data.unrecognised) {
      p.appendChild(document.createTextNode("; "));
      var a = el("a", "", data.unrecognised.title);
      a.href = root + data.unrecognised.url;
      p.appendChild(a);
      p.appendChild(document.createTextNode(" says what to collect"));
    }
    p.appendChild(document.createTextNode("."));
    li.appendChild(p);
    list.appendChild(li);
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
      if (!n) {
        status.textContent = "No match (" + outcome.lines + " lines looked at).";
        renderNoMatch(list, outcome);
        return;
      }
      status.textContent = n === 1 ? "One runbook matches." : "Best match first; " + (n - 1) + " other runbook"
        + (n > 2 ? "s" : "") + " also recognise a message here.";
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
