// goatbeat dashboard: instants in UTC or in the browser's own zone.
//
// The server writes every instant in UTC, inside an element that carries it exactly: a
// <time datetime="…" data-shown="iso"> (2026-12-06T15:00:01Z; "plain": a next run, in the
// schedule's zone as served), a chart's tick with
// data-instant and data-form, a <time datetime title> whose text is relative ("3m ago", left
// as it is: only its hover text changes). A switch in the header shows them all in this
// browser's zone or in UTC; the choice is remembered by this browser. Regions a live update
// brings are shown the same way. Without JavaScript the page reads UTC, as rendered.
(function () {
  "use strict";

  const KEY = "goatbeat.zone";
  const local = Intl.DateTimeFormat().resolvedOptions().timeZone || "local";

  function chosen() {
    try {
      return window.localStorage.getItem(KEY) === "local" ? "local" : "utc";
    } catch (e) {
      return document.documentElement.dataset.zone === "local" ? "local" : "utc";
    }
  }

  function pad(n, width) {
    return String(n).padStart(width || 2, "0");
  }

  // The parts of an instant in the chosen zone.
  function parts(date, mode) {
    if (mode === "utc") {
      return { y: date.getUTCFullYear(), mo: date.getUTCMonth() + 1, d: date.getUTCDate(),
               h: date.getUTCHours(), mi: date.getUTCMinutes(), s: date.getUTCSeconds(),
               ms: date.getUTCMilliseconds(), offset: 0 };
    }
    return { y: date.getFullYear(), mo: date.getMonth() + 1, d: date.getDate(),
             h: date.getHours(), mi: date.getMinutes(), s: date.getSeconds(),
             ms: date.getMilliseconds(), offset: -date.getTimezoneOffset() };
  }

  function offsetText(minutes) {
    if (minutes === 0) return "Z";
    const sign = minutes > 0 ? "+" : "-";
    const whole = Math.abs(minutes);
    return sign + pad(Math.floor(whole / 60)) + ":" + pad(whole % 60);
  }

  function zoneAbbreviation(date, mode) {
    if (mode === "utc") return "UTC";
    try {
      const found = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
        .formatToParts(date).find((part) => part.type === "timeZoneName");
      if (found) return found.value;
    } catch (e) { /* no Intl zone names: the offset says it */ }
    return offsetText(-date.getTimezoneOffset());
  }

  function format(date, form, mode) {
    const p = parts(date, mode);
    const day = p.y + "-" + pad(p.mo) + "-" + pad(p.d);
    const hm = pad(p.h) + ":" + pad(p.mi);
    switch (form) {
      case "hms": return hm + ":" + pad(p.s);
      case "hm": return hm;
      case "dhm": return pad(p.mo) + "-" + pad(p.d) + " " + hm;
      case "short": {
        const ms = p.ms ? "." + pad(p.ms, 3) : "";
        return pad(p.mo) + "-" + pad(p.d) + " " + hm + ":" + pad(p.s) + ms;
      }
      case "d": return day;
      case "plain": {
        const ms = p.ms ? "." + pad(p.ms, 3) : "";
        return day + " " + hm + ":" + pad(p.s) + ms + " " + zoneAbbreviation(date, mode);
      }
      default: {
        // Local: a space between date and time (RFC 3339 allows it), where a narrow card
        // may wrap the longer offset onto a line of its own.
        const ms = p.ms ? "." + pad(p.ms, 3) : "";
        return day + (mode === "utc" ? "T" : " ") + hm + ":" + pad(p.s) + ms +
          offsetText(p.offset);
      }
    }
  }

  function show(root, mode) {
    const zoneName = mode === "local" ? local : "UTC";
    for (const el of root.querySelectorAll("time[data-shown][datetime]")) {
      if (el.dataset.zoneShown === mode) continue;
      const date = new Date(el.getAttribute("datetime"));
      if (isNaN(date)) continue;
      el.textContent = format(date, el.dataset.shown, mode);
      if (mode === "local") el.title = "UTC: " + format(date, "iso", "utc");
      else el.removeAttribute("title");
      el.dataset.zoneShown = mode;
    }
    for (const el of root.querySelectorAll("[data-instant][data-form]")) {
      if (el.dataset.zoneShown === mode) continue;
      const date = new Date(el.dataset.instant);
      if (isNaN(date)) continue;
      el.textContent = format(date, el.dataset.form, mode);
      el.dataset.zoneShown = mode;
    }
    // A relative time ("3m ago") keeps its text; its hover text leads with the local value.
    for (const el of root.querySelectorAll("time[datetime][title]:not([data-shown])")) {
      if (el.dataset.zoneShown === mode) continue;
      if (el.dataset.utcTitle === undefined) el.dataset.utcTitle = el.title;
      const date = new Date(el.getAttribute("datetime"));
      el.title = mode === "local" && !isNaN(date)
        ? format(date, "iso", "local") + " (" + local + ") · " + el.dataset.utcTitle
        : el.dataset.utcTitle;
      el.dataset.zoneShown = mode;
    }
    for (const el of root.querySelectorAll("[data-zone-name]")) {
      if (el.textContent !== zoneName) el.textContent = zoneName;
    }
  }

  function start() {
    const header = document.querySelector("header.top");
    let mode = chosen();
    if (header) {
      const group = document.createElement("span");
      group.className = "zone-switch";
      group.id = "zone-switch";
      group.setAttribute("role", "group");
      group.setAttribute("aria-label", "Show times in");
      const buttons = {};
      for (const [value, text] of [["utc", "UTC"], ["local", "Local"]]) {
        const button = document.createElement("button");
        button.type = "button";
        button.id = "zone-" + value;
        button.textContent = text;
        button.title = value === "local" ? "Show times in this browser's zone (" + local + ")"
                                         : "Show times in UTC";
        button.addEventListener("click", () => choose(value));
        buttons[value] = button;
        group.append(button);
      }
      const logout = header.querySelector(".logout");
      if (logout) header.insertBefore(group, logout);
      else header.append(group);
      const mark = () => {
        for (const value of Object.keys(buttons)) {
          buttons[value].setAttribute("aria-pressed", value === mode ? "true" : "false");
        }
      };
      mark();
      header.addEventListener("goatbeat-zone", mark);
    }

    function choose(value) {
      mode = value;
      document.documentElement.dataset.zone = value;
      try {
        window.localStorage.setItem(KEY, value);
      } catch (e) { /* storage refused: the choice holds for this page */ }
      show(document, mode);
      if (header) header.dispatchEvent(new Event("goatbeat-zone"));
    }

    show(document, mode);
    // Regions replaced by a live update (static/live.js) arrive in UTC, as served.
    new MutationObserver(() => show(document, mode))
      .observe(document.body, { childList: true, subtree: true });
    // Another tab of this browser chose.
    window.addEventListener("storage", (event) => {
      if (event.key !== KEY) return;
      mode = chosen();
      show(document, mode);
      if (header) header.dispatchEvent(new Event("goatbeat-zone"));
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
