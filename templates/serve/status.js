// Follows a submission's status live (server-sent events); the page works without it (reload).
(function () {
  var status = document.getElementById("status");
  if (!status || !window.EventSource) { return; }
  var link = document.getElementById("report-link");
  var source = new EventSource(status.getAttribute("data-events"));
  source.addEventListener("status", function (event) {
    var data = JSON.parse(event.data);
    status.textContent = data.text;
    if (data.report && link) { link.hidden = false; }
    if (data.state === "done" || data.state === "failed" || data.state === "superseded") { source.close(); }
  });
})();
