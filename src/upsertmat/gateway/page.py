"""The status page at ``/``: jobs, their rates and a job's table, refreshing every two seconds.

One HTML document with its style and script inline: no asset from outside the process (no CDN,
no font, no image). The script reads the API (``/v1/jobs``, ``/v1/jobs/{id}/result/table``) with
the page's cookie when the gateway needs a token: ``upsertmat client page`` (``POST
/v1/login-links``) prints a one-time link that sets it. No credential ever goes in an address.
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
table { border-collapse: collapse; margin: .6em 0 1.2em 0; }
th, td { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
th { background: #f2f2f2; }
tr.job { cursor: pointer; }
tr.job:hover { background: #f7f7ff; }
tr.selected { background: #e8eeff; }
.RUNNING { color: #07641c; font-weight: bold; }
.FAILED { color: #b00020; font-weight: bold; }
.STOPPED, .STOPPING { color: #666; }
#status { color: #666; }
.error { color: #b00020; }
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
<h2 id="table-title" style="font-size:1.1em"></h2>
<div id="table-info"></div>
<table id="result"><thead></thead><tbody></tbody></table>
<script>
"use strict";
let selected = null;

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

async function showJobs() {
  const body = await get("/v1/jobs");
  const tbody = document.querySelector("#jobs tbody");
  tbody.replaceChildren();
  for (const job of body.jobs) {
    const row = document.createElement("tr");
    row.className = "job" + (job.id === selected ? " selected" : "");
    row.dataset.job = job.id;
    const rate = job.changes_per_second === undefined ? "" : job.changes_per_second;
    const cells = [job.id, job.name, job.state, job.committed_batch, job.rows, rate, job.table || "",
                   job.error || ""];
    cells.forEach((value, index) => {
      const td = cell(value === null || value === undefined ? "" : value);
      if (index === 2) { td.className = job.state; }
      if (index === 7) { td.className = "error"; }
      row.appendChild(td);
    });
    row.addEventListener("click", () => { selected = job.id; refresh(); });
    tbody.appendChild(row);
  }
  if (selected === null && body.jobs.length) { selected = body.jobs[0].id; }
  document.getElementById("status").textContent =
    body.jobs.length + " jobs; refreshed " + new Date().toLocaleTimeString();
}

async function showTable() {
  if (selected === null) { return; }
  const path = "/v1/jobs/" + encodeURIComponent(selected) + "/result/table";
  const page = await get(path + "?page_size=50&max_rows=50");
  document.getElementById("table-title").textContent = "job " + selected + ": table";
  document.getElementById("table-info").textContent =
    (page.batch === null ? "no batch committed yet" : "as committed by batch " + page.batch) +
    "; " + page.total + " rows" +
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
