// Live progress on a run page: poll the run's JSON status while it is queued or running.
// A box marked data-refresh also has results drawn on the page by the server: those live
// regions ([data-live-region], and the box itself once the run ends) are fetched again when
// progress moves and when the run ends, so the page shows its results without a reload.
(function () {
  "use strict";
  var box = document.getElementById("run-status");
  if (!box || box.dataset.active !== "1") return;
  var url = box.dataset.statusUrl;
  var refresh = box.dataset.refresh === "1";
  var delay = 1000;
  var shown = box.querySelector('[data-role="done"]');
  var lastDone = shown ? Number(shown.textContent) : null;
  var lastRefresh = 0;
  var REFRESH_EVERY_MS = 3000;
  // Flash messages say what led to the page ("run #5 is queued"): once the run has ended
  // they are stale and go. A message the fetched page carries was consumed by that fetch (an
  // action in another tab): it is shown here, or it would be lost.
  function swapMessages(doc, final) {
    var main = document.querySelector("main");
    var old = main && main.querySelector(":scope > ul.messages");
    if (old && final) old.remove();
    var fresh = doc.querySelector("main > ul.messages");
    if (main && fresh) main.prepend(document.importNode(fresh, true));
  }
  function swapRegions(doc, final) {
    swapMessages(doc, final);
    document.querySelectorAll("[data-live-region]").forEach(function (el) {
      var fresh = el.id && doc.getElementById(el.id);
      if (fresh) el.replaceWith(document.importNode(fresh, true));
    });
    var freshBox = doc.getElementById("run-status");
    if (final && freshBox && box.isConnected) {
      box.replaceWith(document.importNode(freshBox, true));
    }
    // A region may hold the box: keep following the one now on the page.
    box = document.getElementById("run-status") || box;
  }
  // Resolves true once the page's regions show the server's current state.
  function refreshPage(final) {
    lastRefresh = Date.now();
    return fetch(window.location.href, {
      headers: { Accept: "text/html" },
      credentials: "same-origin",
    })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        swapRegions(new DOMParser().parseFromString(html, "text/html"), final);
        return true;
      });
  }
  function set(role, text) {
    var el = box.querySelector('[data-role="' + role + '"]');
    if (el) el.textContent = text;
    return el;
  }
  function stamp(iso) {
    return iso ? iso.replace("T", " ").slice(0, 19) : "—";
  }
  // The distinct causes of the failed items, once the run has ended with some (text only).
  function causes(s, after) {
    var list = s.failure_causes || [];
    if (!list.length || !after || box.querySelector('[data-role="causes"]')) return;
    var wrap = document.createElement("div");
    wrap.className = "failure-causes";
    wrap.dataset.role = "causes";
    var head = document.createElement("h3");
    head.textContent = "Why " + s.failed_items + " item(s) could not be judged";
    var ul = document.createElement("ul");
    list.forEach(function (c) {
      var li = document.createElement("li");
      li.dataset.kind = c.kind;
      var what = document.createElement("strong");
      what.textContent = c.count + " × ";
      var kind = document.createElement("span");
      kind.className = "badge failed";
      kind.textContent = c.kind;
      var message = document.createElement("code");
      message.textContent = c.message;
      var fix = document.createElement("span");
      fix.className = "badge " + (c.resumable ? "running" : "failed");
      fix.textContent = c.resumable ? "resuming helps" : "fix first";
      li.append(what, kind, " ", message, document.createElement("br"), fix, " " + c.advice);
      ul.appendChild(li);
    });
    wrap.append(head, ul);
    after.insertAdjacentElement("afterend", wrap);
  }
  function render(s) {
    var badge = set("status", s.status_label);
    if (badge) badge.className = "badge " + s.status;
    set("done", s.progress_done);
    set("total", s.progress_total);
    set("percent", Number(s.progress_percent).toFixed(0));
    set("failed", s.failed_items);
    set("started", stamp(s.started_at));
    set("finished", stamp(s.finished_at));
    set("duration", s.duration_s === null ? "—" : s.duration_s.toFixed(1) + " s");
    set("attempts", s.attempts);
    var bar = box.querySelector('[data-role="bar"]');
    if (bar) bar.style.width = s.progress_percent + "%";
    var meter = box.querySelector('[role="progressbar"]');
    if (meter) {
      meter.setAttribute("aria-valuenow", s.progress_done);
      meter.setAttribute("aria-valuemax", s.progress_total);
    }
    // Why the run waits (selectors.run_health.run_waiting_reason), or nothing.
    var waiting = set("waiting", s.waiting ? s.waiting.text : "");
    if (waiting) waiting.hidden = !s.waiting;
    var err = set("error", s.error || "");
    if (err) err.hidden = !s.error;
    causes(s, err);
    if (!s.is_active) {
      box.dataset.active = "0";
      var live = box.querySelector('[data-role="live"]');
      if (live) live.hidden = true;
      var result = box.querySelector('[data-role="result"]');
      var link = box.querySelector('[data-role="result-link"]');
      if (result && link && s.result_url) {
        link.href = s.result_url;
        result.hidden = false;
      }
    }
  }
  function poll() {
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (s) {
        render(s);
        delay = 1000;
        if (!refresh) {
          if (s.is_active) setTimeout(poll, delay);
          // Ended: the box is drawn again by the server once (its buttons follow the end).
          else return refreshPage(true);
          return;
        }
        if (!s.is_active) {
          // The run ended: draw its results; a failed fetch is retried by the catch below.
          return refreshPage(true);
        }
        // Progress drawn by the server moved: fetch it again, at most every few seconds
        // (a move within that time is drawn by the next refresh).
        var due = s.progress_done !== lastDone && Date.now() - lastRefresh >= REFRESH_EVERY_MS;
        if (due) lastDone = s.progress_done;
        return (due ? refreshPage(false) : Promise.resolve(true)).then(function () {
          setTimeout(poll, delay);
        });
      })
      .catch(function () {
        // Back off on errors (server restarting, network blip) instead of hammering it.
        delay = Math.min(delay * 2, 15000);
        setTimeout(poll, delay);
      });
  }
  setTimeout(poll, delay);
})();
