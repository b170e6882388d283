/* Tickertape counter, no cookie; see README "Embedding" (SPA, #tt-ignore) */
(function (w, d, h) {
var s = d.currentScript, site = s && s.getAttribute("data-site"), last, sent = [], push = h.pushState;
if (!site) return;
var base = s.src.replace(/\/tt\.js(\?.*)?$/, "");
function off() {
  try {
    var l = localStorage, k = "tt-ignore", f = location.hash;
    if (f == "#" + k) l.setItem(k, 1);
    if (f == "#tt-count") l.removeItem(k);
    return l.getItem(k);
  } catch (e) {}
}
function count() {
  var p = location.pathname, i;
  if (p == last || off()) return;
  last = p;
  sent.push(i = new Image(1, 1));
  i.src = base + "/pixel.gif?site=" + encodeURIComponent(site) + "&page=" + encodeURIComponent(p) + "&t=" + +new Date;
}
h.pushState = function () {
  push.apply(h, arguments);
  count();
};
w.addEventListener("popstate", count);
// prerendered: count once shown
d.prerendering ? d.addEventListener("prerenderingchange", count, { once: true }) : count();
})(window, document, history);
