// The console's own script: the live marker, and a sense's chart (uPlot, vendored).
(function () {
  function drawChart(el) {
    fetch(el.dataset.src, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (d) {
      el.innerHTML = "";
      if (!d.x.length) { el.textContent = d.problem || "no numbers to chart yet"; el.className += " dim"; return; }
      var opts = { width: el.clientWidth || 600, height: 240, scales: { x: { time: true } },
                   series: [{}, { label: d.column, stroke: "#2f5bd3", width: 2 }] };
      el.uplot = new uPlot(opts, [d.x, d.y], el);
      el.dataset.points = String(d.x.length);
    });
  }
  document.addEventListener("DOMContentLoaded", function () {
    var chart = document.getElementById("chart");
    if (chart) { drawChart(chart); }
    var live = document.getElementById("live");
    document.body.addEventListener("htmx:sseOpen", function () { if (live) { live.className = "live on"; } });
    document.body.addEventListener("htmx:sseError", function () { if (live) { live.className = "live"; } });
    document.body.addEventListener("htmx:sseMessage", function () { if (chart && chart.dataset.src) { drawChart(chart); } });
  });
})();
