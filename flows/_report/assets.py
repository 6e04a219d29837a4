"""The reports' stylesheet and script (inline in every page: the report is one
self-contained file; nothing is fetched)."""

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;
background:#fafafa}
main{max-width:1000px;margin:0 auto;padding:1em 1.2em 3em}
h1{font-size:1.5em;margin:.4em 0 .2em}h2{font-size:1.2em;margin-top:1.6em;
border-bottom:1px solid #ddd}h3{font-size:1.05em;margin:.2em 0}
.sub{color:#555;margin:0 0 1em}
table{border-collapse:collapse;margin:0;font-size:.92em}
td,th{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top;
overflow-wrap:normal;word-break:normal;hyphens:manual}
th{background:#f0f0f0}
.tw{overflow-x:auto;max-width:100%;margin:.4em 0}
.num{white-space:nowrap;font-variant-numeric:tabular-nums}
.nw{white-space:nowrap}
.verdict{display:inline-block;padding:1px 8px;border-radius:9px;font-weight:600;
font-size:.85em;white-space:nowrap}
.v-holds{background:#d9f2dd;color:#14532d}.v-fails{background:#fbd5d5;color:#7f1d1d}
.v-na{background:#e5e7eb;color:#374151}.v-vacuous{background:#ede9fe;color:#4c1d95}
.v-undecided{background:#fef3c7;color:#78350f}
.claim{background:#fff;border:1px solid #ddd;border-left:5px solid #9ca3af;border-radius:4px;
padding:.35em .9em;margin:.35em 0}
.claim.holds{border-left-color:#16a34a}.claim.fails{border-left-color:#dc2626}
.ref{color:#444;font-size:.9em;margin:.1em 0 .4em}
.statement{font-style:italic;margin:.3em 0}
.pm td:first-child{font-weight:600;white-space:nowrap}
img.fig{max-width:100%;height:auto;border:1px solid #eee;background:#fff}
label.zoom{display:block;cursor:zoom-in}label.zoom input{position:absolute;opacity:0;
width:1px;height:1px}label.zoom input:checked+img{position:fixed;inset:0;margin:auto;
max-width:98vw;max-height:98vh;width:auto;z-index:10;cursor:zoom-out;
box-shadow:0 0 0 100vmax rgba(0,0,0,.55)}label.zoom input:focus-visible+img{outline:2px solid
#2563eb}
details.claim>summary{font-weight:600}details.claim[open]>summary{margin-bottom:.4em}
svg.chart{max-width:100%;height:auto;font-size:11px;background:#fff}
.chartbox{margin:.5em 0}
.hint{color:#666;font-size:.85em}
pre{background:#f4f4f4;padding:.6em;overflow-x:auto;font-size:.8em}
details{margin:.4em 0}summary{cursor:pointer;color:#333}
.counts span{margin-right:1em}
nav a{margin-right:.8em}
td.desc{min-width:14em;max-width:36em}.obs th code{white-space:nowrap}
td.share{width:7em;min-width:5em}.sbar{display:inline-block;height:.75em;background:#4c78a8;
vertical-align:middle;min-width:1px}ul.hint{margin-top:0}
@media print{details{display:block}}
"""

# Zooming for the charts of class "zoom": drag across the plot to zoom into a time range,
# double-click (or "reset") to return; "log t" / "log y" switch the axes, which start as
# the data's `x_log` / `y_log` say (the axes of the static SVG drawn by Python, which stays
# in place until the script replaces it, so nothing depends on the script).
_JS = r"""
(function(){
"use strict";
var W=640,H=300,M={l:64,r:16,t:14,b:42},C=["#1f77b4","#d62728","#2ca02c","#9467bd",
"#ff7f0e","#8c564b"];
function esc(s){return String(s).replace(/[&<>"]/g,function(c){return {"&":"&amp;",
"<":"&lt;",">":"&gt;",'"':"&quot;"}[c];});}
function tf(v,lg){return lg?(v>0?Math.log10(v):NaN):v;}
function ticks(lo,hi,lg){var t=[];if(lg){var a=Math.floor(lo),b=Math.ceil(hi),
s=Math.max(1,Math.floor((b-a)/6));for(var k=a;k<=b;k+=s){if(k>=lo-1e-9&&k<=hi+1e-9)
t.push([k,"1e"+k]);}return t;}var raw=(hi-lo)/5,mag=Math.pow(10,Math.floor(Math.log10(raw))),
st=[1,2,2.5,5,10].map(function(s){return s*mag;}).filter(function(s){return s>=raw;})[0],
f=Math.ceil(lo/st)*st;for(var v=f;v<=hi+1e-9*st;v+=st){t.push([v,+v.toPrecision(4)+""]);}
return t;}
function draw(box){var d=box._d,st=box._s,xl=st.xlog,yl=st.ylog,xs=[],ys=[];
d.series.forEach(function(s){s.x.forEach(function(x,i){var X=tf(x,xl),Y=tf(s.y[i],yl);
if(isFinite(X)&&X>=st.lo&&X<=st.hi&&isFinite(Y)){xs.push(X);ys.push(Y);}});});
if(!xs.length){return;}var x0=st.lo,x1=st.hi,y0=Math.min.apply(null,ys),
y1=Math.max.apply(null,ys);if(y1===y0){y0-=0.5;y1+=0.5;}var p=(y1-y0)*0.03;y0-=p;y1+=p;
function px(X){return M.l+(X-x0)/(x1-x0)*(W-M.l-M.r);}
function py(Y){return H-M.b-(Y-y0)/(y1-y0)*(H-M.t-M.b);}
var o=['<svg class="chart" viewBox="0 0 '+W+' '+H+'" width="'+W+'" height="'+H+'">',
'<rect x="'+M.l+'" y="'+M.t+'" width="'+(W-M.l-M.r)+'" height="'+(H-M.t-M.b)+
'" fill="#fff" stroke="#bbb"/>'];
ticks(x0,x1,xl).forEach(function(t){var X=px(t[0]);o.push('<line x1="'+X+'" x2="'+X+
'" y1="'+M.t+'" y2="'+(H-M.b)+'" stroke="#eee"/><text x="'+X+'" y="'+(H-M.b+15)+
'" text-anchor="middle">'+t[1]+'</text>');});
ticks(y0,y1,yl).forEach(function(t){var Y=py(t[0]);o.push('<line x1="'+M.l+'" x2="'+
(W-M.r)+'" y1="'+Y+'" y2="'+Y+'" stroke="#eee"/><text x="'+(M.l-5)+'" y="'+(Y+4)+
'" text-anchor="end">'+t[1]+'</text>');});
o.push('<text x="'+(M.l+W-M.r)/2+'" y="'+(H-6)+'" text-anchor="middle">'+
esc(d.x_label+(xl?" (log)":""))+'</text><text transform="translate(14 '+(H-M.b+M.t)/2+
') rotate(-90)" text-anchor="middle">'+esc(d.y_label+(yl?" (log)":""))+'</text>');
o.push('<rect x="'+(W-M.r-156)+'" y="'+(M.t+2)+'" width="152" height="'+
(16*d.series.length+4)+'" fill="#fff" fill-opacity="0.85"/>');
d.series.forEach(function(s,k){var pts=[];s.x.forEach(function(x,i){var X=tf(x,xl),
Y=tf(s.y[i],yl);if(isFinite(X)&&isFinite(Y)&&X>=x0&&X<=x1){pts.push(px(X).toFixed(1)+" "+
py(Y).toFixed(1));}});if(pts.length>1){o.push('<path d="M'+pts.join(" L")+
'" fill="none" stroke="'+C[k%C.length]+'" stroke-width="1.6"/>');}
var ly=M.t+14+16*k;o.push('<line x1="'+(W-M.r-150)+'" x2="'+(W-M.r-126)+'" y1="'+(ly-4)+
'" y2="'+(ly-4)+'" stroke="'+C[k%C.length]+'" stroke-width="2"/><text x="'+(W-M.r-120)+
'" y="'+ly+'">'+esc(s.label)+'</text>');});
o.push('<rect class="sel" x="0" y="'+M.t+'" width="0" height="'+(H-M.t-M.b)+
'" fill="#3b82f6" fill-opacity="0.15"/></svg>');
box.querySelector(".plot").innerHTML=o.join("");
var svg=box.querySelector("svg"),sel=svg.querySelector(".sel"),start=null;
function dx(ev){var r=svg.getBoundingClientRect();return (ev.clientX-r.left)*W/r.width;}
function inv(X){return x0+(X-M.l)/(W-M.l-M.r)*(x1-x0);}
svg.addEventListener("mousedown",function(ev){start=dx(ev);ev.preventDefault();});
svg.addEventListener("mousemove",function(ev){if(start===null){return;}var a=Math.min(start,
dx(ev)),b=Math.max(start,dx(ev));sel.setAttribute("x",a);sel.setAttribute("width",b-a);});
svg.addEventListener("mouseup",function(ev){if(start===null){return;}var a=Math.min(start,
dx(ev)),b=Math.max(start,dx(ev));start=null;if(b-a>4){st.lo=inv(a);st.hi=inv(b);}draw(box);});
svg.addEventListener("dblclick",function(){reset(box);});}
function full(box){var lo=Infinity,hi=-Infinity;box._d.series.forEach(function(s){
s.x.forEach(function(x){var X=tf(x,box._s.xlog);if(isFinite(X)){lo=Math.min(lo,X);
hi=Math.max(hi,X);}});});if(hi===lo){hi=lo+1;}box._s.lo=lo;box._s.hi=hi;}
function reset(box){full(box);draw(box);}
document.querySelectorAll(".zoom").forEach(function(box){
var src=document.getElementById(box.getAttribute("data-src"));if(!src){return;}
box._d=JSON.parse(src.textContent);box._s={xlog:!!box._d.x_log,ylog:!!box._d.y_log};
var bar=document.createElement("div");bar.className="hint";
bar.innerHTML='Drag across the plot to zoom in time; double-click to reset. '+
'<label><input type="checkbox" class="xl"'+(box._s.xlog?" checked":"")+'> log t</label> '+
'<label><input type="checkbox" class="yl"'+(box._s.ylog?" checked":"")+'> log y</label> '+
'<button type="button" class="rs">reset</button>';box.insertBefore(bar,box.firstChild);
bar.querySelector(".xl").addEventListener("change",function(e){box._s.xlog=e.target.checked;
reset(box);});bar.querySelector(".yl").addEventListener("change",function(e){
box._s.ylog=e.target.checked;draw(box);});bar.querySelector(".rs").addEventListener("click",
function(){reset(box);});reset(box);});
})();
"""
