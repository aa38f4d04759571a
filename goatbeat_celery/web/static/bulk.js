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
        count.textContent = byTag ? "every schedule tagged " + tagged.value
          : ticked + " ticked";
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
