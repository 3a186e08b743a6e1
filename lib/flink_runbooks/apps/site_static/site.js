/* Site-wide behaviour: the search box in the header and the colouring of proposed config diffs.
   The search index (assets/search-index.js) is generated when the site is built. */
(function () {
  "use strict";

  var FR = (window.FlinkRunbooks = window.FlinkRunbooks || {});
  var root = document.body.getAttribute("data-root") || "";

  // ------------------------------------------------------------------------------------------- search
  // Fields and how much a match in each counts; every query word must match somewhere.
  var FIELDS = [
    ["title", 10, "title"],
    ["exceptions", 8, "exception"],
    ["messages", 5, "message"],
    ["slug", 5, "runbook"],
    ["meaning", 3, "meaning"],
    ["causes", 2, "root cause"],
    ["text", 1, "page"]
  ];
  var MAX_RESULTS = 8;

  function words(text) {
    return String(text || "").toLowerCase().match(/[a-z0-9_$]+/g) || [];
  }

  function prepare(doc) {
    var fields = {};
    FIELDS.forEach(function (f) {
      var value = doc[f[0]];
      var items = Array.isArray(value) ? value : [value || ""];
      fields[f[0]] = items.map(function (item) {
        var ws = words(item);
        return { text: String(item), words: ws, joined: " " + ws.join(" ") + " " };
      });
    });
    return { doc: doc, fields: fields };
  }

  // Several words in the order typed (a pasted message) count once more per word in the best field holding them.
  function phraseBonus(entry, terms) {
    if (terms.length < 2) return null;
    var phrase = " " + terms.join(" ");
    var best = null;
    FIELDS.forEach(function (f) {
      entry.fields[f[0]].forEach(function (item) {
        if (item.joined.indexOf(phrase) >= 0 && (!best || f[1] > best.weight)) {
          best = { weight: f[1], reason: { field: f[2], name: f[0], text: item.text, term: terms[0] } };
        }
      });
    });
    return best && { score: best.weight * terms.length, reason: best.reason };
  }

  // How well one query word matches one indexed word: whole word, prefix, or inside a longer identifier.
  function wordScore(term, word) {
    if (word === term) return 1;
    if (word.indexOf(term) === 0) return 0.7;
    if (term.length >= 4 && word.indexOf(term) > 0) return 0.4;
    return 0;
  }

  function scoreDoc(entry, terms) {
    var total = 0;
    var reason = null;
    for (var t = 0; t < terms.length; t++) {
      var best = 0;
      var bestReason = null;
      for (var f = 0; f < FIELDS.length; f++) {
        var name = FIELDS[f][0];
        var weight = FIELDS[f][1];
        var items = entry.fields[name];
        for (var i = 0; i < items.length; i++) {
          var ws = items[i].words;
          for (var w = 0; w < ws.length; w++) {
            var s = wordScore(terms[t], ws[w]) * weight;
            if (s > best) {
              best = s;
              bestReason = { field: FIELDS[f][2], name: name, text: items[i].text, term: terms[t] };
            }
          }
        }
      }
      if (best === 0) return null;
      total += best;
      if (!reason || (bestReason && bestReason.name !== "title" && reason.name === "title")) reason = bestReason;
    }
    var phrase = phraseBonus(entry, terms);
    if (phrase) {
      total += phrase.score;
      reason = phrase.reason;
    }
    return { entry: entry, score: total, reason: reason };
  }

  function search(query) {
    var terms = words(query);
    if (!terms.length || !FR.searchIndex) return [];
    if (!FR._prepared) FR._prepared = FR.searchIndex.documents.map(prepare);
    var hits = [];
    FR._prepared.forEach(function (entry) {
      var hit = scoreDoc(entry, terms);
      if (hit) hits.push(hit);
    });
    hits.sort(function (a, b) {
      return b.score - a.score || a.entry.doc.title.localeCompare(b.entry.doc.title);
    });
    return hits;
  }
  FR.search = search;

  function snippet(reason) {
    if (!reason || reason.name === "title") return "";
    var text = reason.text;
    if (reason.name === "text") {
      var at = text.toLowerCase().indexOf(reason.term);
      var start = Math.max(0, at - 50);
      text = (start > 0 ? "…" : "") + text.slice(start, at + reason.term.length + 70) + "…";
    } else if (text.length > 120) {
      text = text.slice(0, 117) + "…";
    }
    return reason.field + ": " + text;
  }

  function setupSearch() {
    var input = document.getElementById("search-input");
    var list = document.getElementById("search-results");
    if (!input || !list) return;
    var selected = -1;

    function close() {
      list.hidden = true;
      input.setAttribute("aria-expanded", "false");
      selected = -1;
    }

    function highlight(index) {
      var items = list.querySelectorAll("a");
      items.forEach(function (a, i) {
        a.classList.toggle("selected", i === index);
      });
      selected = index;
    }

    function render() {
      var query = input.value.trim();
      list.textContent = "";
      selected = -1;
      if (!query) return close();
      var hits = search(query).slice(0, MAX_RESULTS);
      if (!hits.length) {
        var empty = document.createElement("li");
        empty.className = "empty";
        empty.textContent = "No runbook matches “" + query + "”. Have the stack trace? ";
        // a message the index does not hold may still be recognised in the whole trace
        var paste = document.createElement("a");
        paste.href = root + "trace.html";
        paste.className = "paste-link";
        paste.textContent = "Paste it to find the runbook";
        empty.appendChild(paste);
        list.appendChild(empty);
      }
      hits.forEach(function (hit) {
        var li = document.createElement("li");
        var a = document.createElement("a");
        a.href = root + hit.entry.doc.url;
        a.setAttribute("data-slug", hit.entry.doc.slug);
        var title = document.createElement("span");
        title.className = "result-title";
        title.textContent = hit.entry.doc.title;
        var meta = document.createElement("span");
        meta.className = "result-meta";
        meta.textContent = hit.entry.doc.category + " · " + hit.entry.doc.slug;
        a.appendChild(title);
        a.appendChild(meta);
        var why = snippet(hit.reason);
        if (why) {
          var reason = document.createElement("span");
          reason.className = "result-why";
          reason.textContent = why;
          a.appendChild(reason);
        }
        li.appendChild(a);
        list.appendChild(li);
      });
      list.hidden = false;
      input.setAttribute("aria-expanded", "true");
    }

    input.addEventListener("input", render);
    input.addEventListener("focus", function () {
      if (input.value.trim()) render();
    });
    input.addEventListener("keydown", function (event) {
      var links = list.querySelectorAll("a");
      if (event.key === "ArrowDown" && links.length) {
        highlight(Math.min(selected + 1, links.length - 1));
        event.preventDefault();
      } else if (event.key === "ArrowUp" && links.length) {
        highlight(Math.max(selected - 1, 0));
        event.preventDefault();
      } else if (event.key === "Enter" && links.length) {
        window.location.href = links[Math.max(selected, 0)].href;
        event.preventDefault();
      } else if (event.key === "Escape") {
        close();
      }
    });
    document.addEventListener("click", function (event) {
      if (!list.contains(event.target) && event.target !== input) close();
    });
  }

  // ------------------------------------------------------------------------------------------- diffs
  function colourDiffs() {
    document.querySelectorAll("pre.patch-diff").forEach(function (pre) {
      var lines = pre.textContent.replace(/\n$/, "").split("\n");
      pre.textContent = "";
      lines.forEach(function (line) {
        var span = document.createElement("span");
        span.className = /^(\+\+\+|---)/.test(line) ? "diff-file"
          : /^@@/.test(line) ? "diff-hunk"
          : /^\+/.test(line) ? "diff-add"
          : /^-/.test(line) ? "diff-del" : "diff-context";
        span.textContent = line + "\n";
        pre.appendChild(span);
      });
    });
  }

  // A link to a section inside a closed <details> (decisions.html#slug) opens it, so the reader lands on its content.
  function openLinkedSection() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    var details = target && target.closest("details");
    if (details && !details.open) {
      details.open = true;
      target.scrollIntoView();
    }
  }

  // Wide tables stacked as labelled rows on a phone: each cell carries its column's heading.
  function labelTableCells() {
    document.querySelectorAll(".runbook-notebook table").forEach(function (table) {
      var headings = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) {
        return th.textContent.trim();
      });
      if (!headings.length) return;
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        Array.prototype.forEach.call(tr.children, function (cell, i) {
          var offset = tr.children.length - headings.length; // an index column without a heading
          var label = headings[i - offset];
          if (label) cell.setAttribute("data-label", label);
        });
      });
      table.classList.add("labelled");
    });
  }

  // The keys page: one table, one release line at a time (a link to #flink-1-20 picks that release).
  function setupReleasePicker() {
    var picker = document.getElementById("release-picker");
    if (!picker) return;
    var bodies = document.querySelectorAll("tbody[data-release]");
    function show(release) {
      bodies.forEach(function (body) { body.hidden = body.getAttribute("data-release") !== release; });
    }
    function fromHash() {
      var id = location.hash.slice(1);
      if (document.querySelector('tbody[data-release="' + id + '"]')) {
        picker.value = id;
        show(id);
      }
    }
    picker.addEventListener("change", function () { show(picker.value); });
    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  setupSearch();
  setupReleasePicker();
  openLinkedSection();
  window.addEventListener("hashchange", openLinkedSection);
  labelTableCells();
  colourDiffs();
})();
