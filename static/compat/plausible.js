/* Tickertape, no cookie: Plausible's script API (data-domain, data-api, window.plausible); page path with utm_ fields, referrer origin (README "Switching from Plausible") */
(function(w,d,l,h){
var s=d.currentScript,dom=s&&s.getAttribute("data-domain");if(!dom)return;
var api=s.getAttribute("data-api")||new URL(s.src).origin+"/api/event",q=w.plausible&&w.plausible.q||[],push=h.pushState,r=d.referrer&&new URL(d.referrer).origin,last;
function url(){var u=(l.search.match(/utm_(source|medium|campaign)=[^&]*/g)||[]).join("&");return l.origin+l.pathname+(u?"?"+u:"")}
function send(n,o){o=o||{};var b={n:n,u:o.u||url(),d:dom,r:r||null};
fetch(api,{method:"POST",headers:{"Content-Type":"text/plain"},keepalive:true,body:JSON.stringify(b)}).then(function(x){o.callback&&o.callback({status:x.status})},function(x){o.callback&&o.callback({error:x})})}
function page(){if(l.pathname==last)return;last=l.pathname;send("pageview");r=l.origin}
w.plausible=function(n,o){send(n,o)};
for(var i=0;i<q.length;i++)w.plausible.apply(w,q[i]);
h.pushState=function(){push.apply(h,arguments);page()};w.addEventListener("popstate",page);
d.prerendering?d.addEventListener("prerenderingchange",page,{once:1}):page();
})(window,document,location,history);
