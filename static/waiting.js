/* Dashboard of a site with no view yet: asks every 10 seconds whether the
   first view has arrived, then shows it (no timed page refresh, which would
   disrupt a screen reader). */
(function () {
  var box = document.getElementById("waiting");
  if (!box) return;
  var status = box.getAttribute("data-status"), next = box.getAttribute("data-next");
  setInterval(function () {
    fetch(status, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : {}; })
      .then(function (s) { if (s.seen) location.assign(next); })
      .catch(function () {});
  }, 10000);
})();
