/* Tickertape: counts one view of this page.
   <script async src="https://YOUR-TICKERTAPE/tt.js" data-site="SITE-ID"></script>
   Sends only the site id and location.pathname; sets no cookie. */
(function () {
  var script = document.currentScript;
  if (!script) return;
  var site = script.getAttribute("data-site");
  if (!site) return;
  var base = script.src.replace(/\/tt\.js(\?.*)?$/, "");
  var sent = [];
  function count() {
    var img = new Image(1, 1);
    sent.push(img); // keep a reference until the request completes
    img.src = base + "/pixel.gif?site=" + encodeURIComponent(site) +
      "&page=" + encodeURIComponent(location.pathname);
  }
  // A prerendered page may never be shown: count it when it is.
  if (document.prerendering) {
    document.addEventListener("prerenderingchange", count, { once: true });
  } else {
    count();
  }
})();
