/* Tickertape, no cookie: GoatCounter's count.js API (data-goatcounter, data-goatcounter-settings, data-goatcounter-click, window.goatcounter.count); path, utm_ fields, referrer origin (README "Switching from GoatCounter") */
(function(w,d,l,e){
var s=d.querySelector("script[data-goatcounter]"),ep=s&&s.getAttribute("data-goatcounter");if(!ep)return;
var gc=w.goatcounter=w.goatcounter||{},r=d.referrer&&new URL(d.referrer).origin,sent=[];
try{var st=JSON.parse(s.getAttribute("data-goatcounter-settings")||"{}");for(var k in st)gc[k]=st[k]}catch(x){}
function send(q){var i=new Image;sent.push(i);i.src=ep+"?"+q+"&s="+screen.width+","+screen.height+","+(w.devicePixelRatio||1)+"&rnd="+Math.random().toString(36).slice(2)}
gc.count=function(o){o=o||{};var u=(l.search.match(/utm_(source|medium|campaign)=[^&]*/g)||[]).join("&");
send("p="+e(o.path||l.pathname)+(o.event?"&e=true":"&r="+e(o.referrer!=null?o.referrer:r||"")+(u?"&q="+e("?"+u):"")));r=l.origin};
d.addEventListener("click",function(v){v=v.target.closest&&v.target.closest("[data-goatcounter-click]");v&&gc.count({path:v.getAttribute("data-goatcounter-click"),event:true})},1);
if(!gc.no_onload)gc.count();
})(window,document,location,encodeURIComponent);
