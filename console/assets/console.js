// Umbra console: keyboard shortcuts. Every page works without this script.
//   j / k   next / previous row of the page's main list ([data-nav] rows, fleet diff groups)
//   Enter   open the focused row's first link (a group: expand or collapse it)
//   /       focus the page's filter field ([data-filter], else the first form field)
"use strict";
(function () {
  function rows() {
    var groups = document.querySelectorAll("details.group > summary");
    if (groups.length) return Array.prototype.slice.call(groups);
    return Array.prototype.slice.call(document.querySelectorAll("[data-nav] tbody tr"));
  }
  function typing(e) {
    var t = e.target;
    return t && (t.isContentEditable || /^(INPUT|SELECT|TEXTAREA)$/.test(t.tagName));
  }
  var current = -1;
  function move(delta) {
    var list = rows();
    if (!list.length) return;
    var now = list.indexOf(document.activeElement);
    if (now < 0) now = current;
    current = Math.max(0, Math.min(list.length - 1, now + delta));
    list.forEach(function (r) { r.classList.remove("nav-current"); });
    var row = list[current];
    row.classList.add("nav-current");
    if (row.tagName !== "SUMMARY" && !row.hasAttribute("tabindex")) row.setAttribute("tabindex", "-1");
    row.focus();
    row.scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || typing(e)) return;
    if (e.key === "j") { move(1); e.preventDefault(); }
    else if (e.key === "k") { move(-1); e.preventDefault(); }
    else if (e.key === "/") {
      var f = document.querySelector("[data-filter]") || document.querySelector("main input, main select");
      if (f) { f.focus(); e.preventDefault(); }
    } else if (e.key === "Enter" && document.activeElement && document.activeElement.tagName === "TR") {
      var link = document.activeElement.querySelector("a");
      if (link) { link.click(); e.preventDefault(); }
    }
  });
})();
