/* The dashboard's "right now" figure: asks every 10 seconds for the views
   of the last five minutes and updates the number in place (a polite live
   region, so a screen reader hears it without the page reloading). The
   figure is served with the page, so without this script it is simply the
   number at load time. */
(function () {
  var box = document.getElementById("now");
  if (!box) return;
  var source = box.getAttribute("data-now"), views = document.getElementById("now-views"),
    noun = document.getElementById("now-noun");
  if (!source || !views || !noun) return;
  setInterval(function () {
    if (document.hidden) return;
    fetch(source, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (n) {
        if (!n || typeof n.views !== "number") return;
        views.textContent = n.views.toLocaleString("en-US");
        noun.textContent = n.views === 1 ? "view" : "views";
      })
      .catch(function () {});
  }, 10000);
})();
