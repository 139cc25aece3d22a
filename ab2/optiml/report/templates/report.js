// OptiML report: draws the inlined Plotly charts and opens the tree where a link points.
(function () {
  "use strict";

  function drawCharts() {
    var holder = document.getElementById("optiml-charts");
    if (!holder || typeof Plotly === "undefined") return;
    JSON.parse(holder.textContent).forEach(function (chart) {
      var div = document.getElementById(chart.id);
      if (div) Plotly.newPlot(div, chart.data, chart.layout, { displaylogo: false, responsive: true });
    });
  }

  // Open every <details> that holds the element, so a link into a collapsed subtree shows its target.
  function reveal(id) {
    var target = document.getElementById(id);
    if (!target) return;
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    target.scrollIntoView({ block: "center" });
  }

  function setAll(selector, open) {
    document.querySelectorAll(selector).forEach(function (d) { d.open = open; });
  }

  document.addEventListener("DOMContentLoaded", function () {
    drawCharts();
    document.querySelectorAll("[data-tree-action]").forEach(function (button) {
      button.addEventListener("click", function () {
        var action = button.getAttribute("data-tree-action");
        var tree = document.querySelector("ul.tree");
        if (action === "expand") setAll("ul.tree li > details", true);
        if (action === "collapse") setAll("ul.tree li > details", false);
        if (action === "path" && tree) {
          tree.classList.toggle("path-only");
          button.textContent = tree.classList.contains("path-only") ? "Whole tree" : "Best path only";
        }
      });
    });
    document.querySelectorAll('a[href^="#node-"]').forEach(function (link) {
      link.addEventListener("click", function () { reveal(link.getAttribute("href").slice(1)); });
    });
    window.addEventListener("hashchange", function () { reveal(location.hash.slice(1)); });
    if (location.hash) reveal(location.hash.slice(1));
  });
})();
