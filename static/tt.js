/* Tickertape, no cookie: path with utm_ fields, referrer origin, screen width (docs/embedding.md) */
(function(w,d,h,e){
var s=d.currentScript,site=s&&s.getAttribute("data-site"),last,sent=[],push=h.pushState,r=d.referrer&&new URL(d.referrer).origin;
if(!site)return;
var base=s.src.replace(/\/tt\.js(\?.*)?$/,""),V=P(s,"data-prop-");
function P(x,f,o,a,i){o={};for(a=x.attributes,i=0;i<a.length;i++)a[i].name.indexOf(f)||(o[a[i].name.slice(f.length)]=a[i].value);return o}
function J(o){for(var k in o)return"&props="+e(JSON.stringify(o));return""}
function off(){try{var l=localStorage,k="tt-ignore",f=location.hash;
if(f=="#"+k)l.setItem(k,1);if(f=="#tt-count")l.removeItem(k);return l.getItem(k)}catch(x){}}
function send(q){var i=new Image;sent.push(i);i.src=base+"/pixel.gif?site="+e(site)+q+"&w="+screen.width+"&t="+ +new Date}
function count(){var l=location,p=l.pathname,u=(l.search.match(/utm_(source|medium|campaign)=[^&]*/g)||[]).join("&");
if(p==last||off())return;last=p;send("&page="+e(u?p+"?"+u:p)+"&ref="+e(r)+J(V));r=l.origin}
function track(n,p,v){n&&!off()&&send("&page="+e(location.pathname)+"&e="+e(n)+J(p)+(v?"&revenue="+e(JSON.stringify(v)):""))}
w.tickertape={track:track};
d.addEventListener("click",function(v){v=v.target.closest&&v.target.closest("[data-tt-event]");v&&track(v.dataset.ttEvent,P(v,"data-tt-prop-"))},1);
h.pushState=function(){push.apply(h,arguments);count()};
w.addEventListener("popstate",count);
d.prerendering?d.addEventListener("prerenderingchange",count,{once:1}):count();
})(window,document,history,encodeURIComponent);
