// The view's only stylesheet and script, served from this process (no CDN, no build step). The
// pages work without the script; it adds live updates over Server-Sent Events.
export const APP_CSS = `
:root { --ink:#1d2330; --muted:#4d5565; --line:#d8dce4; --bg:#f6f7f9; --card:#fff;
  --ok:#17663a; --ok-bg:#e3f4ea; --bad:#a3141c; --bad-bg:#fde7e8; --warn:#7a4b00; --warn-bg:#fff1d6;
  --info:#194f95; --info-bg:#e4eefc; --grey-bg:#eceef2; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; color:var(--ink); background:var(--bg); }
a { color:var(--info); }
code, .mono { font-family: ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace; font-size:12.5px; overflow-wrap:anywhere; }
bdi.ext { unicode-bidi:isolate; overflow-wrap:anywhere; }
h1, .verdict, td, dd, li { overflow-wrap:anywhere; }
a.whole { font-size:12px; white-space:nowrap; }
header.top { display:flex; align-items:center; gap:24px; padding:10px 24px; background:#1d2330; color:#fff; }
header.top .brand { font-weight:700; letter-spacing:.3px; color:#fff; text-decoration:none; font-size:16px; }
header.top nav a { color:#dfe5ef; text-decoration:none; margin-right:18px; padding:4px 0; }
header.top nav a[aria-current="page"] { color:#fff; border-bottom:2px solid #8fb8ff; }
header.top .ledger { margin-left:auto; color:#c5cddb; font-size:12px; }
#live-status { font-size:12px; color:#c5cddb; }
#live-status.on::before { content:"● "; color:#5fd38d; }
main { padding:18px 24px 40px; max-width:1280px; }
h1 { font-size:20px; margin:4px 0 12px; }
h2 { font-size:16px; margin:22px 0 8px; }
.card > h2:first-child, .card > h3:first-child { margin-top:0; }
.card { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:12px 14px; margin-bottom:14px; }
table { border-collapse:collapse; width:100%; background:var(--card); }
th, td { text-align:left; padding:6px 8px; border-bottom:1px solid var(--line); vertical-align:top; }
th { font-size:12px; text-transform:uppercase; letter-spacing:.4px; color:var(--muted); background:#fafbfc; }
tr.prio-0 td:first-child { box-shadow: inset 4px 0 0 var(--bad); }
tr.prio-1 td:first-child { box-shadow: inset 4px 0 0 #d08a00; }
.badge { display:inline-block; padding:1px 8px; border-radius:10px; font-size:12px; font-weight:600; white-space:nowrap; }
.s-succeeded { background:var(--ok-bg); color:var(--ok); }
.s-failed { background:var(--grey-bg); color:#3b4250; }
.s-unknown, .s-open { background:var(--warn-bg); color:var(--warn); }
.s-duplicate_effect_confirmed, .s-dup { background:var(--bad-bg); color:var(--bad); }
.s-cancelled { background:var(--grey-bg); color:var(--muted); }
form.filters { display:flex; flex-wrap:wrap; gap:10px 14px; align-items:flex-end; }
form.filters label { display:flex; flex-direction:column; font-size:12px; color:var(--muted); gap:3px; }
form.filters input, form.filters select { font:inherit; padding:4px 6px; border:1px solid #b9c0cc; border-radius:4px; min-width:120px; background:#fff; color:var(--ink); }
form.filters input[type=search] { min-width:280px; }
fieldset.states { border:0; padding:0; margin:0; display:flex; gap:6px; flex-wrap:wrap; }
fieldset.states input { min-width:0; margin:0; }
fieldset.states legend { font-size:12px; color:var(--muted); margin-bottom:3px; padding:0; }
fieldset.states label { flex-direction:row; align-items:center; gap:4px; color:var(--ink); background:#fff; border:1px solid var(--line); padding:2px 8px; border-radius:12px; }
button, .button { font:inherit; padding:5px 12px; border-radius:4px; border:1px solid #2a5db0; background:#2a5db0; color:#fff; cursor:pointer; text-decoration:none; }
.button.secondary { background:#fff; color:#2a5db0; }
.pager { display:flex; gap:10px; align-items:center; margin:10px 0; color:var(--muted); }
.summary-line { color:var(--muted); margin:8px 0; }
.verdict { font-size:16px; font-weight:700; padding:10px 14px; border-radius:6px; margin:10px 0 14px; }
.verdict.bad { background:var(--bad-bg); color:var(--bad); border:2px solid var(--bad); }
.verdict.warn { background:var(--warn-bg); color:var(--warn); border:1px solid #d9a441; }
.verdict.ok { background:var(--ok-bg); color:var(--ok); border:1px solid #8cc9a3; }
.verdict .sub { display:block; font-size:13px; font-weight:500; margin-top:4px; }
dl.facts { display:grid; grid-template-columns: 170px 1fr; gap:4px 12px; margin:0; }
dl.facts dt { color:var(--muted); }
dl.facts dd { margin:0; overflow-wrap:anywhere; }
.grid2 { display:grid; grid-template-columns: minmax(0,3fr) minmax(0,2fr); gap:14px; }
@media (max-width: 900px) { .grid2 { grid-template-columns: 1fr; } }
.timeline svg { width:100%; height:auto; display:block; }
.timeline text { font: 12px system-ui,sans-serif; fill:#1d2330; }
.timeline text.dup-label { fill:#a3141c; font-weight:700; }
.timeline .axis text { fill:#4d5565; font-size:11px; }
.timeline .axis line { stroke:#c9ced8; }
.ph-connect { fill:#7aa7e8; } .ph-send { fill:#3d6fc2; } .ph-wait { fill:#c7d2e3; } .ph-body { fill:#2f9e63; }
.ph-lost { fill:url(#lost); stroke:#a3141c; stroke-width:1.5; }
.ph-none { fill:#eceef2; stroke:#9aa3b2; stroke-dasharray:3 2; }
.mark-obs { fill:#7a4b00; } .mark-obs.dup { fill:#a3141c; }
.mark-appr { fill:#5b3aa8; } .mark-res { fill:#1d2330; stroke:#1d2330; stroke-width:2; }
.legend { display:flex; flex-wrap:wrap; gap:6px 16px; font-size:12px; color:var(--muted); margin:6px 0 0; padding:0; list-style:none; }
.legend .sw { display:inline-block; width:12px; height:12px; border-radius:2px; vertical-align:-2px; margin-right:5px; }
.sw.connect { background:#7aa7e8; } .sw.send { background:#3d6fc2; } .sw.wait { background:#c7d2e3; } .sw.body { background:#2f9e63; }
.sw.lost { background:repeating-linear-gradient(45deg,#fde7e8 0 3px,#a3141c 3px 5px); }
.sw.obs { background:#7a4b00; transform:rotate(45deg) scale(.8); } .sw.appr { background:#5b3aa8; border-radius:50%; }
.sw.res { background:#1d2330; width:4px; }
.lost-note { color:var(--bad); font-weight:600; }
ol.textline { margin:6px 0 0; padding-left:22px; }
ol.textline li { margin:2px 0; }
pre.cmd { background:#1d2330; color:#e8edf5; padding:10px 12px; border-radius:6px; white-space:pre-wrap; overflow-wrap:anywhere; margin:6px 0; }
pre.diag { background:#fafbfc; border:1px solid var(--line); padding:8px; border-radius:4px; max-height:220px; overflow:auto; margin:4px 0; }
.sealed { display:inline-block; padding:2px 8px; border:1px dashed #5b3aa8; color:#4a2d91; border-radius:4px; background:#f3effc; }
.flag { color:var(--bad); font-weight:700; }
.ok-text { color:var(--ok); font-weight:600; }
ol.calls { list-style:none; padding:0; margin:0; }
ol.calls li { background:var(--card); border:1px solid var(--line); border-radius:6px; padding:8px 12px; margin:6px 0; }
ol.calls li.violation { border:2px solid var(--bad); background:#fff8f8; }
ol.calls .why { color:var(--bad); font-weight:600; margin-top:4px; }
#live-feed { list-style:none; padding:0; margin:0; max-height:160px; overflow:auto; font-size:12.5px; }
#live-feed li { padding:2px 0; border-bottom:1px dotted var(--line); }
.muted { color:var(--muted); }
.sr-only { position:absolute; width:1px; height:1px; overflow:hidden; clip:rect(0 0 0 0); white-space:nowrap; }
`;

export const APP_JS = `
(function () {
  'use strict';
  var status = document.getElementById('live-status');
  var feed = document.getElementById('live-feed');
  var region = document.getElementById('live-region');
  var watch = region ? region.getAttribute('data-watch') : null;
  var busy = false, again = false, tries = 0, later = null;
  // Refreshes the live region. A refresh that fails (the view busy, a dropped connection) or that
  // still trails the ledger (the listing is projected just after each commit, and says so with
  // data-trails) is tried again, 0.25 s, 0.5 s, ... 4 s later: the region must not stay behind
  // an event it was told about just because no further event comes.
  function refresh() {
    if (!region) return;
    if (busy) { again = true; return; }
    busy = true;
    if (later) { clearTimeout(later); later = null; }
    var retry = false;
    fetch(location.pathname + location.search, { credentials: 'same-origin', cache: 'no-store' })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (text === null) { retry = true; return; }
        var doc = new DOMParser().parseFromString(text, 'text/html');
        var fresh = doc.getElementById('live-region');
        if (fresh) region.innerHTML = fresh.innerHTML;
        if (region.querySelector('[data-trails]')) retry = true;
      })
      .catch(function () { retry = true; })
      .then(function () {
        busy = false;
        if (again) { again = false; tries = 0; refresh(); return; }
        if (retry && tries < 5) { later = setTimeout(refresh, 250 * Math.pow(2, tries)); tries += 1; }
        else tries = 0;
      });
  }
  if (!window.EventSource) return;
  var es = new EventSource('/events');
  es.addEventListener('open', function () { if (status) { status.textContent = 'live'; status.className = 'on'; } });
  es.addEventListener('error', function () { if (status) { status.textContent = 'reconnecting'; status.className = ''; } });
  es.addEventListener('ledger', function (msg) {
    var events;
    try { events = JSON.parse(msg.data); } catch (e) { return; }
    if (feed) {
      events.slice(-20).forEach(function (ev) {
        var li = document.createElement('li');
        var t = new Date(ev.at).toISOString().slice(11, 23);
        li.textContent = '#' + ev.seq + '  ' + t + '  ' + ev.kind + (ev.operation_id ? '  ' + ev.operation_id : '');
        feed.insertBefore(li, feed.firstChild);
      });
      while (feed.children.length > 50) feed.removeChild(feed.lastChild);
    }
    var relevant = watch === '*' || events.some(function (ev) {
      return ev.operation_id === watch || ev.session_id === watch;
    });
    if (relevant) { tries = 0; refresh(); }
  });
})();
`;
