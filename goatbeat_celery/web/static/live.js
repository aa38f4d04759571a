// goatbeat dashboard: live updates of a page's data-live regions, and the schedules list's
// action bar (the second part, below). One file: a page runs no script but this one.
//
// Every few seconds (data-every on this script's tag) the page is read again with a GET of
// its own URL, with the browser's own cookies, as a reload would; each element marked
// data-live is replaced by the element with the same id in what the server sends back. A
// region is left as it is while it holds the focus, a form with unsaved edits, the text the
// person is selecting or the pointer pressing a button. Updates can be paused (remembered
// by this browser); without JavaScript the page is what the server rendered, unchanged.
(function () {
  "use strict";

  const script = document.currentScript;
  const PAUSED_KEY = "goatbeat.live.paused";
  const LONGEST_WAIT = 60000; // backing off after failures stops there

  function start() {
    if (!document.querySelector("[data-live][id]")) return;
    const every = Math.max(1, Number(script && script.dataset.every) || 5) * 1000;
    let wait = every;
    let timer = null;
    let inFlight = false;
    let failingSince = null;
    let pressed = false;
    let finished = false;

    const bar = document.createElement("div");
    bar.className = "live-bar";
    bar.id = "live-bar";
    const updated = document.createElement("span");
    updated.id = "live-updated";
    const failing = document.createElement("span");
    failing.id = "live-failing";
    failing.className = "live-failing";
    failing.setAttribute("role", "status");
    failing.hidden = true;
    const toggle = document.createElement("button");
    toggle.type = "button";
    toggle.id = "live-toggle";
    toggle.className = "live-toggle";
    bar.append(updated, failing, toggle);
    const main = document.querySelector("main");
    (main || document.body).prepend(bar);

    // An instant as the server writes one (UTC), which static/zones.js shows in the
    // browser's zone when the person chose local times.
    function clock(date) {
      const stamp = document.createElement("time");
      stamp.dateTime = date.toISOString();
      stamp.dataset.shown = "hms";
      stamp.textContent = [date.getUTCHours(), date.getUTCMinutes(), date.getUTCSeconds()]
        .map((n) => String(n).padStart(2, "0")).join(":");
      const zone = document.createElement("span");
      zone.dataset.zoneName = "";
      zone.textContent = "UTC";
      const shown = document.createElement("span");
      shown.append(stamp, " (", zone, ")");
      return shown;
    }

    function paused() {
      try {
        return window.localStorage.getItem(PAUSED_KEY) === "1";
      } catch (e) {
        return toggle.dataset.paused === "1"; // no storage: paused for this page only
      }
    }

    function setPaused(value) {
      toggle.dataset.paused = value ? "1" : "";
      try {
        if (value) window.localStorage.setItem(PAUSED_KEY, "1");
        else window.localStorage.removeItem(PAUSED_KEY);
      } catch (e) { /* storage refused: the button still works on this page */ }
      show();
    }

    function show() {
      const stopped = paused();
      toggle.textContent = stopped ? "Resume updates" : "Pause updates";
      toggle.setAttribute("aria-pressed", stopped ? "true" : "false");
      bar.classList.toggle("paused", stopped);
    }

    function markUpdated(date) {
      updated.replaceChildren("Updated ", clock(date), paused() ? ", updates paused" : "");
      updated.dataset.at = String(date.getTime());
    }

    function markFailing(reason) {
      if (failingSince === null) failingSince = new Date();
      failing.replaceChildren("updates failing since ", clock(failingSince));
      failing.title = reason;
      failing.hidden = false;
    }

    function edited(region) {
      for (const field of region.querySelectorAll("input, textarea, select")) {
        if (field.type === "checkbox" || field.type === "radio") {
          if (field.checked !== field.defaultChecked) return true;
        } else if (field.tagName === "SELECT") {
          for (const option of field.options) {
            if (option.selected !== option.defaultSelected) return true;
          }
        } else if (field.value !== field.defaultValue) {
          return true;
        }
      }
      return false;
    }

    function busy(region) {
      const active = document.activeElement;
      if (active && active !== document.body && region.contains(active)) return true;
      if (pressed && region.matches(":hover")) return true;
      const selection = window.getSelection();
      if (selection && !selection.isCollapsed && selection.rangeCount > 0 &&
          selection.getRangeAt(0).intersectsNode(region)) return true;
      return edited(region);
    }

    // The region at the top of the window, and where it is: put back there after the
    // regions above it have grown or shrunk.
    function anchor() {
      for (const region of document.querySelectorAll("[data-live][id]")) {
        const box = region.getBoundingClientRect();
        if (box.bottom > 0) return { id: region.id, top: box.top };
      }
      return null;
    }

    // What the server last sent for each region: a region the page's other script changed
    // since (its times shown in local time) is not replaced while the server sends the same.
    const served = new Map();

    function replace(fresh) {
      const held = anchor();
      for (const old of Array.from(document.querySelectorAll("[data-live][id]"))) {
        if (busy(old)) continue;
        const now = fresh.getElementById(old.id);
        if (now === null) {
          // Gone from the page (a cancel button once the backfill ended).
          old.remove();
          continue;
        }
        const before = served.has(old.id) ? served.get(old.id) : old.outerHTML;
        if (now.outerHTML === before) continue;
        served.set(old.id, now.outerHTML);
        const scrolled = Array.from(old.querySelectorAll(".scroll"), (box) => box.scrollLeft);
        const replacement = document.importNode(now, true);
        old.replaceWith(replacement);
        replacement.querySelectorAll(".scroll").forEach((box, i) => {
          if (scrolled[i]) box.scrollLeft = scrolled[i];
        });
      }
      if (held !== null) {
        const again = document.getElementById(held.id);
        if (again !== null) {
          const moved = again.getBoundingClientRect().top - held.top;
          if (window.scrollY > 0 && moved !== 0) window.scrollBy(0, moved);
        }
      }
    }

    function schedule(delay) {
      window.clearTimeout(timer);
      timer = window.setTimeout(poll, delay);
    }

    async function poll() {
      if (paused() || inFlight || finished) return;
      if (document.hidden) {
        schedule(every); // read again once the tab is looked at (visibilitychange)
        return;
      }
      inFlight = true;
      try {
        const response = await fetch(window.location.href, {
          method: "GET", credentials: "same-origin", cache: "no-store",
          headers: { Accept: "text/html" },
        });
        if (response.redirected) throw new Error("signed out: reload the page to sign in");
        if (!response.ok) throw new Error("the server answered " + response.status);
        const html = await response.text();
        const fresh = new DOMParser().parseFromString(html, "text/html");
        const regions = Array.from(document.querySelectorAll("[data-live][id]"));
        if (!regions.some((region) => fresh.getElementById(region.id) !== null)) {
          throw new Error("not this page");
        }
        if (!paused()) {
          replace(fresh);
          markUpdated(new Date());
        }
        if (!document.querySelector("[data-live][id]")) {
          // The page says it will not change any more (a run that has ended).
          finished = true;
          window.clearTimeout(timer);
          updated.append("; nothing more will change");
          toggle.hidden = true;
          return;
        }
        failingSince = null;
        failing.hidden = true;
        wait = every;
      } catch (error) {
        markFailing(String(error && error.message ? error.message : error));
        wait = Math.min(wait * 2, LONGEST_WAIT);
      } finally {
        inFlight = false;
      }
      if (!paused()) schedule(wait);
    }

    toggle.addEventListener("click", () => {
      const stop = !paused();
      setPaused(stop);
      if (stop) {
        window.clearTimeout(timer);
        markUpdated(new Date(Number(updated.dataset.at)));
      } else {
        wait = every;
        poll();
      }
    });
    // Another tab of this browser paused or resumed.
    window.addEventListener("storage", (event) => {
      if (event.key !== PAUSED_KEY) return;
      show();
      markUpdated(new Date(Number(updated.dataset.at)));
      if (!paused()) schedule(0);
    });
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden && !paused() && failingSince === null) schedule(0);
    });
    document.addEventListener("pointerdown", () => { pressed = true; }, true);
    document.addEventListener("pointerup", () => { pressed = false; }, true);
    document.addEventListener("pointercancel", () => { pressed = false; }, true);

    show();
    markUpdated(new Date());
    if (!paused()) schedule(every);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

// goatbeat dashboard: the schedules list's action bar. Counts the schedules ticked, ticks
// every one of the page from the header's box, and, while "every schedule tagged" is
// ticked, greys the page's boxes (the tag selects, on every page). Without JavaScript the
// boxes and the bar work the same, only without the count and the header's box.
(function () {
  "use strict";

  function start() {
    const form = document.getElementById("bulk");
    if (!form) return;
    const boxes = Array.from(form.querySelectorAll("input[name=names]"));
    const page = document.getElementById("tick-page");
    const tagged = document.getElementById("all-tagged");
    const count = document.getElementById("bulk-count");

    function update() {
      const ticked = boxes.filter((box) => box.checked).length;
      const byTag = tagged && tagged.checked;
      boxes.forEach((box) => { box.disabled = byTag; });
      if (page) {
        page.disabled = byTag;
        page.checked = ticked > 0 && ticked === boxes.length;
        page.indeterminate = ticked > 0 && ticked < boxes.length;
      }
      if (count) {
        // Ticked by tag, the box beside says which: the count of this page says nothing.
        count.hidden = byTag;
        count.textContent = ticked + " ticked";
      }
    }

    if (page) {
      page.hidden = false;
      page.addEventListener("change", () => {
        boxes.forEach((box) => { box.checked = page.checked; });
        update();
      });
    }
    boxes.forEach((box) => box.addEventListener("change", update));
    if (tagged) tagged.addEventListener("change", update);
    update();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
