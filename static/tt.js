/* Tickertape: no cookie; sends the path, its utm_source and the referrer's origin, nothing else (README "Embedding") */
(function(w,d,h,e){
var s=d.currentScript,site=s&&s.getAttribute("data-site"),last,sent=[],push=h.pushState,r=d.referrer&&new URL(d.referrer).origin;
if(!site)return;
var base=s.src.replace(/\/tt\.js(\?.*)?$/,"");
function off(){
 try{
  var l=localStorage,k="tt-ignore",f=location.hash;
  if(f=="#"+k)l.setItem(k,1);
  if(f=="#tt-count")l.removeItem(k);
  return l.getItem(k);
 }catch(x){}
}
function count(){
 var l=location,p=l.pathname,u=l.search.match(/[?&](utm_source=[^&]*)/),i;
 if(p==last||off())return;
 last=p;
 sent.push(i=new Image);
 i.src=base+"/pixel.gif?site="+e(site)+"&page="+e(u?p+"?"+u[1]:p)+"&ref="+e(r)+"&t="+ +new Date;
 r=l.origin;
}
h.pushState=function(){push.apply(h,arguments);count()};
w.addEventListener("popstate",count);
d.prerendering?d.addEventListener("prerenderingchange",count,{once:1}):count();
})(window,document,history,encodeURIComponent);
