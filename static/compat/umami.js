/* Tickertape, no cookie: Umami's script API (data-website-id, data-host-url, data-domains, data-auto-track, data-umami-event, window.umami.track); page path with utm_ fields, referrer origin (README "Switching from Umami") */
(function(w,d,l,h){
var s=d.currentScript,a=function(k){return s&&s.getAttribute("data-"+k)},id=a("website-id");if(!id)return;
var host=(a("host-url")||new URL(s.src).origin).replace(/\/$/,""),doms=(a("domains")||"").split(",").map(function(x){return x.trim()}).filter(Boolean),push=h.pushState,r=d.referrer&&new URL(d.referrer).origin,last;
function url(){var u=(l.search.match(/utm_(source|medium|campaign)=[^&]*/g)||[]).join("&");return l.pathname+(u?"?"+u:"")}
function send(p){if(doms.length&&doms.indexOf(l.hostname)<0)return Promise.resolve();p.website=id;p.hostname=l.hostname;p.screen=screen.width+"x"+screen.height;
return fetch(host+"/api/send",{method:"POST",headers:{"Content-Type":"application/json"},keepalive:true,body:JSON.stringify({type:"event",payload:p})}).catch(function(){})}
function page(){if(l.pathname==last)return;last=l.pathname;send({url:url(),referrer:r||""});r=l.origin}
function track(n,data){if(typeof n=="function")return send(n({url:url()}));if(n&&typeof n=="object")return send(n);return n?send({url:url(),name:n,data:data}):(last=0,page())}
w.umami={track:track,identify:function(){return Promise.resolve()}};
d.addEventListener("click",function(v){v=v.target.closest&&v.target.closest("[data-umami-event]");v&&track(v.getAttribute("data-umami-event"))},1);
if(a("auto-track")!="false"){h.pushState=function(){push.apply(h,arguments);page()};w.addEventListener("popstate",page);page()}
})(window,document,location,history);
