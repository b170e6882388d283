/* Tickertape: docs/embedding.md */
(function(w,d,h,e){
var s=d.currentScript,site=s&&s.getAttribute("data-site"),L,pg,sd,sn,ms,at,A=[],Q=h.pushState,r=d.referrer&&new URL(d.referrer).origin;
if(!site)return;
var B=s.src.replace(/\/tt\.js(\?.*)?$/,""),V=P(s,"data-prop-");
function P(x,f,o,a,i){o={};for(a=x.attributes,i=0;i<a.length;i++)a[i].name.indexOf(f)||(o[a[i].name.slice(f.length)]=a[i].value);return o}
function J(o){for(var k in o)return"&props="+e(JSON.stringify(o));return""}
function off(){try{var l=localStorage,k="tt-ignore",f=location.hash;
if(f=="#"+k)l.setItem(k,1);if(f=="#tt-count")l.removeItem(k);return l.getItem(k)}catch(x){}}
function U(q){return B+"/pixel.gif?site="+e(site)+q+"&w="+screen.width+"&t="+ +new Date}
function N(q){var i=new Image;A.push(i);i.src=U(q)}
function S(){var x=Math.min(100,Math.round((w.scrollY+w.innerHeight)/d.documentElement.scrollHeight*100));x>sd&&(sd=x)}
function T(){at&&(ms+=new Date-at);at=d.visibilityState=="visible"?+new Date:0}
function E(u){T();if(pg&&!off()&&(sd>sn||ms)){u=U("&page="+e(pg)+"&sd="+sd+"&et="+ms);sn=sd;ms=0;fetch(u,{keepalive:!0,mode:"no-cors"})}}
function count(){var l=location,p=l.pathname,u=(l.search.match(/utm_(source|medium|campaign)=[^&]*/g)||[]).join("&");
if(p==L||off())return;E();L=p;pg=u?p+"?"+u:p;sd=0;sn=-1;ms=at=0;T();S();N("&page="+e(pg)+"&ref="+e(r)+J(V));r=l.origin}
function track(n,p,v){n&&!off()&&N("&page="+e(location.pathname)+"&e="+e(n)+J(p)+(v?"&revenue="+e(JSON.stringify(v)):""))}
w.tickertape={track:track};
d.addEventListener("click",function(v){v=v.target.closest&&v.target.closest("[data-tt-event]");v&&track(v.dataset.ttEvent,P(v,"data-tt-prop-"))},1);
w.addEventListener("scroll",S);
d.addEventListener("visibilitychange",function(){d.visibilityState=="hidden"?E():T()});
w.addEventListener("pagehide",E);
h.pushState=function(){Q.apply(h,arguments);count()};
w.addEventListener("popstate",count);
d.prerendering?d.addEventListener("prerenderingchange",count,{once:1}):count();
})(window,document,history,encodeURIComponent);
