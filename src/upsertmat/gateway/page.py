"""The status page at ``/``: jobs, their rates, a job's recent batches plotted, and its table,
refreshing every two seconds.

One HTML document with its style and script inline: no asset from outside the process (no CDN,
no font, no image). The script reads the API (``/v1/jobs``, ``/v1/jobs/{id}/history``,
``/v1/jobs/{id}/result/table``) with the page's cookie when the gateway needs a token:
``upsertmat client page`` (``POST /v1/login-links``) prints a one-time link that sets it. No
credential ever goes in an address. The plots (changes/s, the batch's time in the sink step,
the source files waiting, each against the time of the batch's commit) are inline SVG that the
page's own script draws from the job's history: the last 300 batches since the job last started
in this gateway process.
"""

from __future__ import annotations

STATUS_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>upsertmat gateway</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.3em; margin: 0 0 .2em 0; }
h2 { font-size: 1.1em; }
table { border-collapse: collapse; margin: .6em 0 1.2em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
th { background: #f2f2f2; }
tr.job { cursor: pointer; }
tr.job:hover { background: #f7f7ff; }
tr.selected { background: #e8eeff; }
.RUNNING { color: #07641c; font-weight: bold; }
.FAILED { color: #b00020; font-weight: bold; }
.STOPPED, .STOPPING { color: #666; }
.none { color: #888; }
#status { color: #666; }
.error { color: #b00020; }
#plots { display: flex; flex-wrap: wrap; gap: 1em; }
figure.plot { margin: 0; }
figure.plot figcaption { font-size: .9em; color: #444; }
svg.plot { background: #fbfbfb; border: 1px solid #ddd; }
svg.plot polyline { fill: none; stroke: #2456c7; stroke-width: 1.5; }
svg.plot circle { fill: #2456c7; }
svg.plot line { stroke: #999; stroke-width: 1; }
svg.plot text { font-size: 10px; fill: #555; }
</style>
</head>
<body>
<h1>upsertmat gateway</h1>
<div id="status">loading ...</div>
<table id="jobs">
<thead><tr><th>job</th><th>name</th><th>state</th><th>committed batch</th><th>rows</th>
<th>changes/s</th><th>table</th><th>error</th></tr></thead>
<tbody></tbody>
</table>
<h2 id="plots-title"></h2>
<div id="plots"></div>
<h2 id="table-title"></h2>
<div id="table-info"></div>
<table id="result"><thead></thead><tbody></tbody></table>
<script>
"use strict";
const SVG = "http://www.w3.org/2000/svg";
const PLOTS = [
  ["changes_per_second", "changes/s"],
  ["batch_seconds", "seconds per batch (sink step)"],
  ["files_waiting", "source files waiting"],
];
let selected = null;

function plural(count, noun, many) { return count + " " + (count === 1 ? noun : (many || noun + "s")); }

function cell(value) {
  const td = document.createElement("td");
  td.textContent = (typeof value === "string") ? value : JSON.stringify(value);
  return td;
}

async function get(path) {
  const response = await fetch(path, {credentials: "same-origin"});
  const body = await response.json();
  if (!response.ok) { throw new Error(body.error ? body.error.message : response.statusText); }
  return body;
}

function shown(value, absent) {
  return (value === null || value === undefined) ? absent : value;
}

async function showJobs() {
  const body = await get("/v1/jobs");
  const tbody = document.querySelector("#jobs tbody");
  tbody.replaceChildren();
  for (const job of body.jobs) {
    const row = document.createElement("tr");
    row.className = "job" + (job.id === selected ? " selected" : "");
    row.dataset.job = job.id;
    const cells = [job.id, job.name, job.state, shown(job.committed_batch, "none yet"),
                   shown(job.rows, "unknown"), shown(job.changes_per_second, ""), job.table || "",
                   job.error || ""];
    cells.forEach((value, index) => {
      const td = cell(value);
      if (index === 2) { td.className = job.state; }
      if ((index === 3 && job.committed_batch === null) || (index === 4 && job.rows === null)) {
        td.className = "none";
      }
      if (index === 7) { td.className = "error"; }
      row.appendChild(td);
    });
    row.addEventListener("click", () => { selected = job.id; refresh(); });
    tbody.appendChild(row);
  }
  if (selected === null && body.jobs.length) { selected = body.jobs[0].id; }
  document.getElementById("status").textContent =
    plural(body.jobs.length, "job") + "; refreshed " + new Date().toLocaleTimeString();
}

function svgElement(name, attributes, text) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) { element.setAttribute(key, String(value)); }
  if (text !== undefined) { element.textContent = text; }
  return element;
}

function number(value) {
  // short enough for an axis label: 12.5, 340, 12.3k, 4.5M
  const size = Math.abs(value);
  if (size >= 1e6) { return (value / 1e6).toFixed(1) + "M"; }
  if (size >= 1e4) { return (value / 1e3).toFixed(1) + "k"; }
  return size >= 100 ? String(Math.round(value)) : String(Math.round(value * 100) / 100);
}

function plot(metric, title, batches) {
  // One metric against the time of each batch's commit: a polyline over [0, max].
  const width = 320, height = 130, left = 46, right = 10, top = 10, bottom = 22;
  const points = batches.filter((b) => b[metric] !== null && b[metric] !== undefined)
                        .map((b) => [Date.parse(b.at) / 1000, b[metric]]);
  const figure = document.createElement("figure");
  figure.className = "plot";
  figure.dataset.metric = metric;
  const svg = svgElement("svg", {class: "plot", width: width, height: height,
                                 viewBox: "0 0 " + width + " " + height, role: "img",
                                 "aria-label": title});
  const floor = height - bottom;
  svg.appendChild(svgElement("line", {x1: left, y1: floor, x2: width - right, y2: floor}));
  svg.appendChild(svgElement("line", {x1: left, y1: top, x2: left, y2: height - bottom}));
  const caption = document.createElement("figcaption");
  if (points.length === 0) {
    svg.appendChild(svgElement("text", {x: left + 8, y: height / 2}, "no batch yet in this gateway process"));
    caption.textContent = title;
  } else {
    const first = points[0][0], last = points[points.length - 1][0];
    const span = Math.max(last - first, 1);
    const highest = Math.max(...points.map((p) => p[1]), 0) || 1;
    const x = (t) => left + (t - first) / span * (width - left - right);
    const y = (v) => height - bottom - v / highest * (height - top - bottom);
    const coordinates = points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ");
    svg.appendChild(svgElement("polyline", {points: coordinates}));
    const end = points[points.length - 1];
    svg.appendChild(svgElement("circle", {cx: x(end[0]).toFixed(1), cy: y(end[1]).toFixed(1), r: 2.5}));
    svg.appendChild(svgElement("text", {x: 4, y: top + 8}, number(highest)));
    svg.appendChild(svgElement("text", {x: 4, y: height - bottom}, "0"));
    const clock = (t) => new Date(t * 1000).toLocaleTimeString();
    svg.appendChild(svgElement("text", {x: left, y: height - 6}, clock(first)));
    svg.appendChild(svgElement("text", {x: width - right, y: height - 6, "text-anchor": "end"}, clock(last)));
    caption.textContent = title + ": " + number(end[1]) + " at the last batch";
  }
  figure.appendChild(svg);
  figure.appendChild(caption);
  return figure;
}

async function showPlots() {
  if (selected === null) { return; }
  const history = await get("/v1/jobs/" + encodeURIComponent(selected) + "/history");
  document.getElementById("plots-title").textContent =
    "job " + selected + ": " + plural(history.batches.length, "recent batch", "recent batches");
  const plots = document.getElementById("plots");
  plots.replaceChildren(...PLOTS.map(([metric, title]) => plot(metric, title, history.batches)));
}

async function showTable() {
  if (selected === null) { return; }
  const path = "/v1/jobs/" + encodeURIComponent(selected) + "/result/table";
  const page = await get(path + "?page_size=50&max_rows=50");
  document.getElementById("table-title").textContent = "job " + selected + ": table";
  document.getElementById("table-info").textContent =
    (page.batch === null ? "no batch committed yet" : "as committed by batch " + page.batch) +
    "; " + plural(page.total, "row") +
    (page.total > page.rows.length ? " (first " + page.rows.length + " shown)" : "");
  const head = document.querySelector("#result thead");
  const headRow = document.createElement("tr");
  for (const name of page.columns) {
    const th = document.createElement("th");
    th.textContent = name;
    headRow.appendChild(th);
  }
  head.replaceChildren(headRow);
  const tbody = document.querySelector("#result tbody");
  tbody.replaceChildren();
  for (const values of page.rows) {
    const row = document.createElement("tr");
    values.forEach((value) => row.appendChild(cell(value)));
    tbody.appendChild(row);
  }
}

async function refresh() {
  try {
    await showJobs();
    await showPlots();
    await showTable();
  } catch (error) {
    document.getElementById("status").textContent = "error: " + error.message;
  }
}

refresh();
setInterval(refresh, 2000);
</script>
</body>
</html>
"""
